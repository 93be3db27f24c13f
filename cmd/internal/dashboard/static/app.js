// Eventide dashboard: plain JavaScript, no framework, no build step.
// Everything it shows comes from the HTTP API of the server that served
// it (relative URLs, so it also works behind a path prefix). Data goes
// into the page as text (textContent), never as HTML.
"use strict";
(function () {
  // window.eventide exposes the charts (uPlot instances) and the tail's
  // state to the browser test and to anyone debugging in the console.
  const ui = { charts: {}, tail: { received: 0, lastId: "" } };
  window.eventide = ui;

  const $ = (sel, root) => (root || document).querySelector(sel);
  const fmtInt = new Intl.NumberFormat("en");
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff7f0e"];

  // ---- the bearer token -------------------------------------------------
  // Kept in sessionStorage: it survives reloads of this tab, never other
  // tabs or a closed browser, and is sent only to this server.
  const TOKEN_KEY = "eventide.token";
  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
  function authHeaders(extra) {
    const h = Object.assign({}, extra);
    if (token()) h.Authorization = "Bearer " + token();
    return h;
  }
  function showTokenState() {
    $("#token-state").textContent = token() ? "token set for this tab" : "no token";
  }

  // ---- API calls --------------------------------------------------------
  class APIError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  // query builds a query string from [name, value] pairs, dropping empty
  // values (the API treats an empty value as absent anyway).
  function query(pairs) {
    const q = new URLSearchParams();
    for (const [k, v] of pairs) if (v !== undefined && v !== null && v !== "") q.append(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }

  // api GETs a JSON answer, turns a problem+json into an APIError with its
  // detail, and records the answer's freshness for the header.
  async function api(path, pairs) {
    const resp = await fetch(path + query(pairs || []), { headers: authHeaders({ Accept: "application/json" }), cache: "no-store" });
    const text = await resp.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch (e) {
      throw new APIError(resp.status, "the server answered " + resp.status + " with a body that is not JSON");
    }
    $("#auth-needed").hidden = resp.status !== 401;
    if (!resp.ok) {
      throw new APIError(resp.status, (body && (body.detail || body.title)) || resp.status + " " + resp.statusText);
    }
    if (body && body.freshness) noteFreshness(body.freshness);
    return body;
  }

  function showError(section, err) {
    const p = $("[data-error]", section);
    if (!err) {
      p.hidden = true;
      p.textContent = "";
      return;
    }
    p.textContent = err instanceof APIError ? "Error " + err.status + ": " + err.message : "Error: " + err.message;
    p.hidden = false;
  }

  // ---- freshness: "as of 12:03:07, 40 events behind" ----------------------
  function timeOfDay(d) {
    return d.toLocaleTimeString("en-GB", { hour12: false });
  }
  function describeFreshness(f) {
    const shards = (f && f.shards) || [];
    if (shards.length === 0) return "freshness unknown";
    let oldest = null;
    let pending = 0;
    let pendingKnown = true;
    for (const s of shards) {
      if (s.applied_time) {
        const t = new Date(s.applied_time);
        if (!oldest || t < oldest) oldest = t;
      }
      if (typeof s.pending === "number") pending += s.pending;
      else pendingKnown = false;
    }
    const as = oldest ? "as of " + timeOfDay(oldest) : "stored up to stream sequence " + fmtInt.format(Math.min(...shards.map((s) => s.applied_seq || 0)));
    if (!pendingKnown) return as + ", lag not counted yet";
    if (pending === 0) return as + ", up to date";
    return as + ", " + fmtInt.format(pending) + (pending === 1 ? " event" : " events") + " behind";
  }
  function noteFreshness(f) {
    ui.freshness = f;
    $("#freshness").textContent = describeFreshness(f);
  }

  // ---- pages --------------------------------------------------------------
  // One section per page; the URL's hash says which is shown. A page's
  // load runs when it is shown and, with auto refresh, every 10 s while
  // it stays shown.
  const pages = {};
  let current = null;
  let refreshTimer = null;

  function route() {
    const id = (location.hash || "#rates").slice(1);
    // Another anchor (the skip link's #main) leaves the page as it is.
    if (!pages[id] && current) return;
    const page = pages[id] ? id : "rates";
    for (const s of document.querySelectorAll("[data-page]")) s.hidden = s.id !== page;
    for (const a of document.querySelectorAll("nav a")) {
      if (a.getAttribute("href") === "#" + page) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    if (current !== page) {
      // A page chosen from the navigation gets the focus on its heading,
      // so keyboard and screen reader users land on what they opened.
      if (current) {
        const h = $("#" + page + " h2");
        h.tabIndex = -1;
        h.focus();
      }
      current = page;
      run(page);
    }
  }

  async function run(name) {
    const page = pages[name];
    if (!page.load) return;
    clearTimeout(refreshTimer);
    try {
      await page.load();
      showError(page.section, null);
    } catch (err) {
      showError(page.section, err);
    }
    if (page.auto && page.auto.checked && current === name) {
      refreshTimer = setTimeout(() => current === name && run(name), 10000);
    }
  }

  function windowBounds(value) {
    const hours = { "15m": 0.25, "1h": 1, "6h": 6, "24h": 24, "168h": 168 }[value] || 1;
    const to = new Date();
    return { from: new Date(to.getTime() - hours * 3600e3), to, hours };
  }
  // stepFor keeps a chart at 60 to 360 points.
  function stepFor(hours) {
    if (hours <= 1) return "1m";
    if (hours <= 6) return "5m";
    if (hours <= 24) return "15m";
    return "1h";
  }

  // ---- top types ----------------------------------------------------------
  async function topTypes(from, to, limit) {
    const body = await api("v1/types/top", [["from", from.toISOString()], ["to", to.toISOString()], ["limit", limit]]);
    return (body.types || []).map((t) => ({ type: t.type, count: t.count }));
  }

  pages.top = {
    section: $("#top"),
    async load() {
      const { from, to } = windowBounds($("#top-window").value);
      const types = await topTypes(from, to, 20);
      const tbody = $("#top-table tbody");
      tbody.replaceChildren();
      const max = types.reduce((m, t) => Math.max(m, t.count), 0);
      const total = types.reduce((s, t) => s + t.count, 0);
      for (const t of types) {
        const tr = row([t.type, fmtInt.format(t.count)], [null, "num"]);
        const td = document.createElement("td");
        const bar = document.createElement("span");
        bar.className = "bar";
        bar.style.width = (max ? Math.round((120 * t.count) / max) : 0) + "px";
        td.append(bar, ((100 * t.count) / (total || 1)).toFixed(1) + " %");
        tr.append(td);
        tbody.append(tr);
      }
      $("#top-caption").textContent = types.length
        ? "Events per type from " + timeOfDay(from) + " to " + timeOfDay(to) + ", most first"
        : "No events in this window.";
    },
  };

  // ---- event rate per type ------------------------------------------------
  // counts answers [times (Unix seconds), counts of types[0], ...] for
  // uPlot, from one multi-type /v1/counts request.
  async function counts(types, from, to, step) {
    const pairs = types.map((t) => ["type", t]);
    pairs.push(["from", from.toISOString()], ["to", to.toISOString()], ["step", step]);
    const body = await api("v1/counts", pairs);
    const byType = new Map((body.series || []).map((s) => [s.type, s.points]));
    const first = byType.get(types[0]) || [];
    const data = [first.map((p) => Date.parse(p.time) / 1000)];
    for (const t of types) data.push((byType.get(t) || []).map((p) => p.count));
    return data;
  }

  function drawRates(types, data, step) {
    const el = $("#rates-chart");
    const width = Math.max(320, el.clientWidth || 800);
    let chart = ui.charts.rates;
    const sameSeries = chart && chart.series.length === types.length + 1 && types.every((t, i) => chart.series[i + 1].label === t);
    if (chart && sameSeries) {
      chart.setData(data);
      return;
    }
    if (chart) chart.destroy();
    const opts = {
      width,
      height: 320,
      scales: { x: { time: true } },
      series: [{ label: "time" }].concat(
        types.map((t, i) => ({ label: t, stroke: palette[i % palette.length], width: 2, points: { show: data[0].length < 90 } }))
      ),
      axes: [{}, { label: "events per " + step, size: 60 }],
    };
    ui.charts.rates = new uPlot(opts, data, el);
  }

  function ratesTable(types, data) {
    const table = document.createElement("table");
    const head = row(["time"].concat(types), [], "th");
    const thead = document.createElement("thead");
    thead.append(head);
    const tbody = document.createElement("tbody");
    for (let i = 0; i < data[0].length; i++) {
      const cells = [new Date(data[0][i] * 1000).toLocaleString("en-GB", { hour12: false })];
      for (let j = 1; j < data.length; j++) cells.push(fmtInt.format(data[j][i]));
      tbody.append(row(cells, [null].concat(types.map(() => "num"))));
    }
    table.append(thead, tbody);
    $("#rates-table").replaceChildren(table);
  }

  pages.rates = {
    section: $("#rates"),
    auto: $("#rates-auto"),
    async load() {
      const { from, to, hours } = windowBounds($("#rates-window").value);
      const step = stepFor(hours);
      let types = $("#rates-types")
        .value.split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      if (types.length === 0) types = (await topTypes(from, to, 5)).map((t) => t.type);
      if (types.length === 0) {
        $("#rates-summary").textContent = "No events in this window.";
        return;
      }
      const data = await counts(types, from, to, step);
      const totals = types.map((t, i) => t + " " + fmtInt.format(data[i + 1].reduce((a, b) => a + b, 0)));
      $("#rates-summary").textContent =
        "Events per " + step + " from " + timeOfDay(from) + " to " + timeOfDay(to) + "; totals: " + totals.join(", ") + ".";
      drawRates(types, data, step);
      ratesTable(types, data);
    },
  };

  window.addEventListener("resize", () => {
    const chart = ui.charts.rates;
    if (chart) chart.setSize({ width: Math.max(320, $("#rates-chart").clientWidth), height: 320 });
  });

  // ---- live tail ------------------------------------------------------------
  // EventSource cannot send an Authorization header, so the tail reads
  // the Server-Sent Events stream with fetch and parses it here. After a
  // break it reconnects with Last-Event-ID, and the server resumes after
  // the last event it delivered.
  const tail = { abort: null };
  const TAIL_ROWS = 200;

  function tailState(text) {
    $("#tail-state").textContent = text;
  }

  function tailEvent(ev) {
    const tbody = $("#tail-table tbody");
    const e = ev.data;
    const tr = row([e.time ? new Date(e.time).toLocaleTimeString("en-GB", { hour12: false }) : "", e.type || "", e.user || e.author || "", JSON.stringify(e.data === undefined ? null : e.data), e.id || ev.id], [null, null, null, "data", "data"]);
    tbody.prepend(tr);
    while (tbody.rows.length > TAIL_ROWS) tbody.deleteRow(-1);
    ui.tail.received++;
  }

  // readEvents parses a text/event-stream body (the WHATWG grammar) and
  // calls onEvent with {event, id, data} for every event dispatched, and
  // onRetry with a retry field's milliseconds. st.lastId is the last event
  // ID buffer: it starts as the id the stream resumes after, and is
  // updated at every dispatch point, as EventSource's lastEventId is.
  async function readEvents(body, st, onEvent, onRetry) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let data = [];
    let event = "";
    let id = st.lastId;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return; // an event not ended by a blank line is dropped
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        if (buf[nl] === "\r" && nl === buf.length - 1) break; // a \r\n may be split
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          st.lastId = id;
          if (data.length) onEvent({ event: event || "message", id, data: data.join("\n") });
          data = [];
          event = "";
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
        else if (field === "id" && !value.includes("\0")) id = value;
        else if (field === "retry" && /^\d+$/.test(value)) onRetry(Number(value));
      }
    }
  }
  ui.readEvents = readEvents; // for the browser test's parser check

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener("abort", () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  async function runTail(type, signal) {
    let retryMs = 1000;
    while (!signal.aborted) {
      const headers = authHeaders({ Accept: "text/event-stream" });
      if (ui.tail.lastId) headers["Last-Event-ID"] = ui.tail.lastId;
      try {
        const types = type ? type.split(",").map((t) => ["type", t]) : [];
        const resp = await fetch("v1/events/stream" + query(types), { headers, signal, cache: "no-store" });
        $("#auth-needed").hidden = resp.status !== 401;
        if (!resp.ok) {
          let detail = resp.status + " " + resp.statusText;
          try {
            detail = (await resp.json()).detail || detail;
          } catch (e) {
            // not a problem+json body; keep the status line
          }
          const err = new APIError(resp.status, detail);
          if (resp.status >= 400 && resp.status < 500 && resp.status !== 429) {
            showError(pages.tail.section, err);
            tailState("Stopped.");
            stopTail();
            return;
          }
          throw err;
        }
        showError(pages.tail.section, null);
        ui.tail.resumedAfter = headers["Last-Event-ID"] || "";
        let ended = "";
        tailState(ui.tail.lastId ? "Resumed after event " + ui.tail.lastId + "; waiting for events." : "Connected; waiting for events" + (type ? " of " + type.split(",").join(", ") : " of every type") + ".");
        await readEvents(
          resp.body,
          ui.tail,
          (ev) => {
            if (ev.event === "message") {
              let e;
              try {
                e = JSON.parse(ev.data);
              } catch (err) {
                e = { data: ev.data };
              }
              tailEvent({ id: ev.id, data: e });
              tailState("Live: " + fmtInt.format(ui.tail.received) + (ui.tail.received === 1 ? " event" : " events") + " received.");
            } else {
              // reset: the resume position was older than the server's
              // replay buffer (events in between are in /v1/events);
              // error: the server ends the stream (slow_client, shutdown),
              // and the loop reconnects with Last-Event-ID.
              let why = ev.data;
              try {
                const d = JSON.parse(ev.data);
                why = d.reason + (d.detail ? ": " + d.detail : "");
              } catch (err) {
                // not JSON; show it as it came
              }
              if (ev.event === "reset") tailState("Resumed with a gap (" + why + "); events in it are in /v1/events.");
              else ended = why;
            }
          },
          (ms) => {
            retryMs = ms;
          }
        );
        if (!signal.aborted) tailState((ended ? "The server ended the stream (" + ended + ")" : "The server closed the stream") + "; reconnecting in " + retryMs / 1000 + " s.");
      } catch (err) {
        if (signal.aborted) return;
        tailState("Disconnected (" + err.message + "); reconnecting in " + retryMs / 1000 + " s.");
      }
      await sleep(retryMs, signal);
    }
  }

  function stopTail() {
    if (tail.abort) tail.abort.abort();
    tail.abort = null;
    $("#tail-start").disabled = false;
    $("#tail-stop").disabled = true;
  }

  pages.tail = { section: $("#tail") };
  $("#tail-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    stopTail();
    const type = $("#tail-type")
      .value.split(",")
      .map((s) => s.trim())
      .filter(Boolean)
      .join(",");
    if (ui.tail.type !== type) {
      ui.tail.lastId = "";
      $("#tail-table tbody").replaceChildren();
    }
    ui.tail.type = type;
    tail.abort = new AbortController();
    $("#tail-start").disabled = true;
    $("#tail-stop").disabled = false;
    tailState("Connecting...");
    runTail(type, tail.abort.signal);
  });
  $("#tail-stop").addEventListener("click", () => {
    stopTail();
    tailState("Stopped.");
  });

  // ---- timeline -------------------------------------------------------------
  const timeline = { user: "", next: "" };
  async function loadTimeline(more) {
    const user = timeline.user;
    const path = "v1/timeline/" + encodeURIComponent(user);
    const body = await api(path, [["limit", 20], ["page", more ? timeline.next : ""]]);
    const list = $("#timeline-posts");
    if (!more) {
      list.replaceChildren();
      const following = await api("v1/users/" + encodeURIComponent(user) + "/following", [["limit", 100]]);
      const names = following.users || [];
      $("#timeline-following").textContent = names.length
        ? user + " follows " + names.join(", ") + (following.next_page ? " and more" : "") + "."
        : user + " follows nobody.";
    }
    for (const p of body.posts || []) {
      const li = document.createElement("li");
      const head = document.createElement("strong");
      head.textContent = p.author;
      const when = document.createElement("time");
      when.dateTime = p.time;
      when.textContent = " " + new Date(p.time).toLocaleString("en-GB", { hour12: false }) + " ";
      const data = document.createElement("code");
      data.textContent = JSON.stringify(p.data);
      li.append(head, when, data);
      list.append(li);
    }
    if (!more && (body.posts || []).length === 0) {
      const li = document.createElement("li");
      li.textContent = "No posts.";
      list.append(li);
    }
    timeline.next = body.next_page || "";
    $("#timeline-more").hidden = !timeline.next;
  }
  pages.timeline = { section: $("#timeline") };
  $("#timeline-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    timeline.user = $("#timeline-user").value.trim();
    if (timeline.user) guarded(pages.timeline, () => loadTimeline(false));
  });
  $("#timeline-more").addEventListener("click", () => guarded(pages.timeline, () => loadTimeline(true)));

  // ---- dead letters ---------------------------------------------------------
  const dlq = { next: "" };
  async function loadDLQ(more) {
    const body = await api("v1/dlq", [["type", $("#dlq-type").value.trim()], ["limit", 50], ["page", more ? dlq.next : ""]]);
    const tbody = $("#dlq-table tbody");
    if (!more) tbody.replaceChildren();
    for (const d of body.dead_letters || []) {
      let text = d.encoding === "base64" ? "(binary, base64) " + d.body : d.body;
      if (text.length > 300) text = text.slice(0, 300) + "…";
      if (d.truncated_from) text += " (cut from " + fmtInt.format(d.truncated_from) + " bytes)";
      tbody.append(
        row(
          [fmtInt.format(d.seq), new Date(d.time).toLocaleString("en-GB", { hour12: false }), d.type, d.reason, d.error, d.original_subject, fmtInt.format(d.stream_seq), text],
          ["num", null, null, null, null, null, "num", "data"]
        )
      );
    }
    if (!more && tbody.rows.length === 0) tbody.append(row(["No dead letters."], []));
    dlq.next = body.next_page || "";
    $("#dlq-more").hidden = !dlq.next;
  }
  pages.dlq = { section: $("#dlq"), load: () => loadDLQ(false) };
  $("#dlq-more").addEventListener("click", () => guarded(pages.dlq, () => loadDLQ(true)));

  // ---- storage health -------------------------------------------------------
  function facts(dl, pairs) {
    dl.replaceChildren();
    for (const [k, v] of pairs) {
      const dt = document.createElement("dt");
      dt.textContent = k;
      const dd = document.createElement("dd");
      dd.textContent = v;
      dl.append(dt, dd);
    }
  }

  pages.health = {
    section: $("#health"),
    auto: $("#health-auto"),
    async load() {
      const [stats, ready] = await Promise.all([api("v1/stats"), readyz()]);
      renderStats(stats);
      const ul = $("#health-checks");
      ul.replaceChildren();
      for (const c of ready.checks || []) {
        const li = document.createElement("li");
        const mark = document.createElement("span");
        mark.className = c.ok ? "ok" : "bad";
        mark.textContent = c.ok ? "ok" : "failing";
        li.append(c.name + ": ", mark);
        if (c.detail) li.append(" (" + c.detail + ")");
        ul.append(li);
      }
    },
  };

  // readyz answers 503 with the same body when a check fails: that is a
  // result to show, not an error.
  async function readyz() {
    const resp = await fetch("readyz", { headers: { Accept: "application/json" }, cache: "no-store" });
    return resp.json();
  }

  const fmtBytes = (n) => {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  };

  function renderStats(stats) {
    const st = stats.storage;
    // The header's freshness: what the stored events reflect, the
    // writer's position.
    const writer = (stats.consumers || []).filter((c) => c.name === "writer");
    if (writer.length) noteFreshness({ shards: writer });
    const consumers = [];
    for (const c of stats.consumers || []) {
      // The same words as the header: a consumer is one shard's freshness.
      const f = { shards: [{ shard: c.shard, applied_seq: c.applied_seq, applied_time: c.applied_time, pending: c.pending }] };
      consumers.push([c.name + " (shard " + c.shard + ")", describeFreshness(f) + "; applied stream sequence " + fmtInt.format(c.applied_seq) + (typeof c.pending === "number" ? ", lag " + fmtInt.format(c.pending) + " messages" : "")]);
    }
    consumers.push(
      ["SSTables", fmtInt.format(st.tables.reduce((n, t) => n + t.sstables, 0)) + " in " + st.tables.length + (st.tables.length === 1 ? " table, " : " tables, ") + fmtBytes(st.tables.reduce((n, t) => n + t.bytes, 0))],
      ["memtables", fmtBytes(st.memtable_bytes) + (st.frozen_memtables ? ", " + st.frozen_memtables + " frozen waiting for flush" : "")],
      ["WAL", fmtBytes(st.wal_bytes) + "; " + fmtInt.format(st.batches) + " batches in " + fmtInt.format(st.wal_syncs) + " fsyncs"],
      ["flushes", fmtInt.format(st.flushes)],
      ["compactions", fmtInt.format(st.compactions) + " done, " + st.compactions_running + " running; read " + fmtBytes(st.compaction_read_bytes) + ", wrote " + fmtBytes(st.compaction_written_bytes)],
      ["tombstones scanned", fmtInt.format(st.tombstones_read) + " by " + fmtInt.format(st.reads) + " reads; " + fmtInt.format(st.purged_tombstones) + " purged"],
      ["write stalls", fmtInt.format(st.write_stalls) + " (" + st.write_stall_seconds.toFixed(1) + " s stalled)"]
    );
    if (stats.tail) {
      const t = stats.tail;
      consumers.push(["live tail", t.clients + " of " + t.max_clients + " clients; " + fmtInt.format(t.slow_disconnects) + " slow clients cut off"]);
    }
    facts($("#health-consumers"), consumers);

    const cols = [
      ["table", (t) => t.name, null],
      ["compaction", (t) => t.compaction, null],
      ["SSTables", (t) => fmtInt.format(t.sstables), "num"],
      ["bytes", (t) => fmtBytes(t.bytes), "num"],
      ["partitions", (t) => fmtInt.format(t.partitions), "num"],
      ["cells", (t) => fmtInt.format(t.cells), "num"],
      ["tombstones", (t) => fmtInt.format(t.tombstones), "num"],
      ["compacting", (t) => fmtInt.format(t.compacting), "num"],
    ];
    const classes = cols.map((c) => c[2]);
    $("#health-tables thead").replaceChildren(row(cols.map((c) => c[0]), classes, "th"));
    const tbody = $("#health-tables tbody");
    tbody.replaceChildren();
    for (const t of st.tables) tbody.append(row(cols.map((c) => c[1](t)), classes));
  }

  // ---- helpers --------------------------------------------------------------
  function row(cells, classes, tag) {
    const tr = document.createElement("tr");
    cells.forEach((c, i) => {
      const td = document.createElement(tag || "td");
      if (tag === "th") td.scope = "col";
      if (classes[i]) td.className = classes[i];
      td.textContent = c === undefined || c === null ? "" : String(c);
      tr.append(td);
    });
    return tr;
  }

  async function guarded(page, f) {
    try {
      await f();
      showError(page.section, null);
    } catch (err) {
      showError(page.section, err);
    }
  }

  // ---- start ----------------------------------------------------------------
  for (const name of ["rates", "top", "dlq", "health"]) {
    $("#" + name + "-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (current === name) run(name);
    });
  }
  for (const name of ["rates", "health"]) {
    pages[name].auto.addEventListener("change", () => current === name && run(name));
  }
  $("#token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("#token").value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    $("#token").value = "";
    showTokenState();
    if (current) run(current);
  });
  $("#token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenState();
  });
  showTokenState();
  window.addEventListener("hashchange", route);
  route();
})();
