package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/eventide/eventide/internal/natstest"
)

// requireBrowserEnv, set to 1 (scripts/test sets it), makes
// TestDashboardInBrowser fail rather than skip when Chromium is missing.
const requireBrowserEnv = "EVENTIDE_REQUIRE_BROWSER"

// findChromium returns the path of Debian's chromium (or
// $EVENTIDE_CHROMIUM); without one the test fails under requireBrowserEnv
// and skips otherwise.
func findChromium(t *testing.T) string {
	t.Helper()
	candidates := []string{"chromium", "chromium-browser"}
	if p := os.Getenv("EVENTIDE_CHROMIUM"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no Chromium found (looked for %s in PATH); install Debian's package with `sudo apt-get install chromium` (./scripts/test does), or set EVENTIDE_CHROMIUM to a Chrome or Chromium binary",
		strings.Join(candidates, ", "))
	if os.Getenv(requireBrowserEnv) == "1" {
		t.Fatalf("%s; %s=1 requires the browser test to run", msg, requireBrowserEnv)
	}
	t.Skip(msg)
	return ""
}

// pageLog gathers what the page must never produce: console errors and
// warnings, uncaught exceptions, browser log errors (a failed load), and
// requests to any origin but the server's.
type pageLog struct {
	mu       sync.Mutex
	problems []string
}

func (l *pageLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *pageLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.problems)
}

// TestDashboardInBrowser drives the built-in dashboard in headless
// Chromium against the whole process (embedded NATS, real storage, the
// writer and the fan-out worker) with events published through
// JetStream: the rate chart's uPlot holds the published counts per type,
// top types, dead letters, a timeline and storage health show, the live
// tail shows an event published while it runs (and, started again, one
// published while it was stopped: Last-Event-ID), and the page logs no
// console error and requests nothing from another origin. The server runs
// with a bearer token, which the page sends (the tail too, through its
// fetch-based SSE reader). Screenshots of each page go to the test's temp
// dir (their path is logged), or to $EVENTIDE_SCREENSHOTS when set.
func TestDashboardInBrowser(t *testing.T) {
	before := goroutineIDs()
	chromium := findChromium(t)
	const token = "browser-s3cret"
	natsAddr, httpAddr := freeAddr(t), freeAddr(t)
	data := t.TempDir() // before the Cleanup below, so removed after the process stops
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data", data, "--nats-listen", natsAddr, "--http", httpAddr, "--http-token", token},
			envFrom(nil), &stdout, &stderr)
	}()
	t.Cleanup(func() { // after the browser and the NATS client are gone (defers)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		checkNoLeakedGoroutines(t, before) // a tail stream's handler included
	})
	base := "http://" + httpAddr
	client := &http.Client{Timeout: 10 * time.Second, Transport: bearerTransport{token}}
	waitReady(t, client, base, done, &stderr)
	waitBanner(t, &stdout)
	if out := stdout.String(); !strings.Contains(out, base+"/") {
		t.Errorf("the banner does not point to the dashboard at %s/:\n%s", base, out)
	}

	_, js := natstest.Connect(t, "nats://"+natsAddr)
	publish := func(subject, body string) {
		t.Helper()
		if _, err := js.Publish(t.Context(), subject, []byte(body)); err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
	}
	// Events spread over the last 20 minutes, inside the page's default
	// window (the last hour); clicks most, so the default chart (the top
	// types) shows all three.
	now := time.Now().UTC()
	published := map[string]int{"click": 30, "view": 12, "signup": 4}
	for typ, n := range published {
		for i := range n {
			at := now.Add(-time.Duration(i*20/n) * time.Minute).Add(-time.Second)
			publish("events."+typ, fmt.Sprintf(`{"time":%q,"user":"u%d","data":{"i":%d}}`, at.Format(time.RFC3339Nano), i%5, i))
		}
	}
	publish("events.follow", fmt.Sprintf(`{"time":%q,"user":"alice","author":"bob"}`, now.Add(-2*time.Minute).Format(time.RFC3339Nano)))
	publish("events.post", fmt.Sprintf(`{"time":%q,"author":"bob","data":{"text":"hello from bob"}}`, now.Add(-time.Minute).Format(time.RFC3339Nano)))
	publish("events.click", "not json") // a dead letter
	// Wait until the writer has stored them: the last click counted.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) { // polling the process under test
		var top struct{ Types []struct{ Type string } }
		getJSON(t, client, base+"/v1/types/top?limit=10", 200, &top)
		var counts struct{ Points []struct{ Count int } }
		getJSON(t, client, base+"/v1/counts?type=click", 200, &counts)
		total := 0
		for _, p := range counts.Points {
			total += p.Count
		}
		if total == published["click"] && len(top.Types) >= 5 { // click, view, signup, follow, post
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s the API counts %d of %d clicks and %d types; log:\n%s", total, published["click"], len(top.Types), stderr.String())
		}
	}

	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // root in containers and CI
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true), // no update checks: only the page's requests
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	defer allocCancel()
	bctx, bcancel := chromedp.NewContext(allocCtx)
	defer bcancel()
	// Start the browser and the tab without a deadline (a deadline on the
	// first Run would end the browser with it); everything after runs
	// under one generous overall timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("cannot start %s: %v", chromium, err)
	}
	var log pageLog
	go func() {
		for m, err := range chromedp.Console(bctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				log.add("console %s at %s:%d: %s", m.Type, m.URL, m.Line, m.Text)
			}
		}
	}()
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			if u, err := url.Parse(e.Request.URL); err != nil || u.Host != httpAddr {
				log.add("request to another origin: %s", e.Request.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(bctx, 60*time.Second)
	defer tcancel()
	// The user entered the token in an earlier visit of this tab.
	if _, err := chromedp.Call(tctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: fmt.Sprintf(`sessionStorage.setItem("eventide.token", %q)`, token),
	}); err != nil {
		t.Fatal(err)
	}

	shots := t.TempDir()
	if dir := os.Getenv("EVENTIDE_SCREENSHOTS"); dir != "" {
		shots = dir
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(shots, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	// poll waits for a JavaScript expression to be truthy and returns its
	// value.
	pollIn := func(ctx context.Context, what, expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(15*time.Second)))
		if err != nil {
			t.Fatalf("%s: %v; page problems so far: %q", what, err, log.list())
		}
		return v
	}
	poll := func(what, expr string) string {
		t.Helper()
		return pollIn(tctx, what, expr)
	}
	show := func(page string) {
		t.Helper()
		if err := chromedp.Do(tctx, chromedp.Click(`nav a[href="#`+page+`"]`, chromedp.NodeVisible)); err != nil {
			t.Fatalf("open page %s: %v", page, err)
		}
	}

	// Event rate: the default chart draws the top 5 types; its uPlot
	// data must hold exactly the published counts per type.
	if err := chromedp.Do(tctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	got := poll("the rate chart", `(() => {
		const c = window.eventide && window.eventide.charts.rates;
		if (!c || c.data.length < 2 || c.data[0].length === 0) return "";
		const totals = {};
		c.series.slice(1).forEach((s, i) => { totals[s.label] = c.data[i + 1].reduce((a, b) => a + (b || 0), 0); });
		return totals.click > 0 ? JSON.stringify(totals) : "";
	})()`)
	for typ, n := range published {
		if !strings.Contains(got, fmt.Sprintf("%q:%d", typ, n)) {
			t.Errorf("the rate chart's uPlot data totals %s; want %s: %d", got, typ, n)
		}
	}
	if pts := poll("the chart's points", `String(window.eventide.charts.rates.data[0].length)`); pts != "60" && pts != "61" {
		t.Errorf("the rate chart has %s points, want 60 or 61 (an hour at 1m)", pts)
	}
	// And drawn: the canvas holds pixels of the click series' colour.
	poll("the drawn click line", `(() => {
		const cv = document.querySelector("#rates-chart canvas");
		const px = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
		let n = 0;
		for (let i = 0; i < px.length; i += 4) if (px[i] === 31 && px[i + 1] === 119 && px[i + 2] === 180) n++;
		return n > 50 ? String(n) : "";
	})()`)
	poll("the freshness line", `(t => /^as of \d\d:\d\d:\d\d, (up to date|\d+ events? behind)/.test(t) && t)(document.querySelector("#freshness").textContent)`)
	screenshot("rates")

	show("top")
	if first := poll("the top types", `(r => r && r.cells[0].textContent + " " + r.cells[1].textContent)(document.querySelector("#top-table tbody tr"))`); first != "click 30" {
		t.Errorf("the first row of top types is %q, want click 30", first)
	}
	screenshot("top")

	show("dlq")
	if row := poll("the dead letters", `(r => r && r.cells.length > 3 && r.textContent)(document.querySelector("#dlq-table tbody tr"))`); !strings.Contains(row, "malformed_json") || !strings.Contains(row, "not json") {
		t.Errorf("the dead-letter row %q lacks the reason malformed_json and the body", row)
	}
	screenshot("dlq")

	show("timeline")
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(`#timeline-user`, "alice", chromedp.NodeVisible),
		chromedp.Click(`#timeline-form button[type=submit]`, chromedp.NodeVisible),
	); err != nil {
		t.Fatal(err)
	}
	poll("alice's timeline", `(t => t.includes("hello from bob") && t)(document.querySelector("#timeline-posts").textContent)`)
	poll("whom alice follows", `(t => t.includes("alice follows bob") && t)(document.querySelector("#timeline-following").textContent)`)
	screenshot("timeline")

	show("health")
	poll("the storage tables", `(r => r && r.textContent)(document.querySelector("#health-tables tbody tr"))`)
	poll("the consumers", `(t => /writer.*as of \d\d:\d\d:\d\d/.test(t) && t)(document.querySelector("#health-consumers").textContent)`)
	poll("the checks", `(t => t.includes("storage: ok") && t)(document.querySelector("#health-checks").textContent)`)
	screenshot("health")

	// Live tail: once connected, an event published now must show.
	show("tail")
	if err := chromedp.Do(tctx,
		chromedp.SendKeys(`#tail-type`, "click", chromedp.NodeVisible),
		chromedp.Click(`#tail-start`, chromedp.NodeVisible),
	); err != nil {
		t.Fatal(err)
	}
	poll("the tail connecting", `(t => t.startsWith("Connected") && t)(document.querySelector("#tail-state").textContent)`)
	marker := fmt.Sprintf("tail-%d", time.Now().UnixNano())
	publish("events.click", fmt.Sprintf(`{"time":%q,"user":"tailer","data":{"marker":%q}}`, time.Now().UTC().Format(time.RFC3339Nano), marker))
	poll("the tailed event", fmt.Sprintf(`(t => t.includes(%q) && t)(document.querySelector("#tail-table tbody").textContent)`, marker))
	screenshot("tail")
	if err := chromedp.Do(tctx, chromedp.Click(`#tail-stop`, chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	poll("the tail stopping", `(t => t === "Stopped." && t)(document.querySelector("#tail-state").textContent)`)

	// Started again for the same type, the tail resumes after the last
	// event it showed (Last-Event-ID): an event published while it was
	// stopped shows too.
	lastSeen := poll("the tail's last event id", `window.eventide.tail.lastId`)
	missed := fmt.Sprintf("missed-%d", time.Now().UnixNano())
	publish("events.click", fmt.Sprintf(`{"time":%q,"user":"tailer","data":{"marker":%q}}`, time.Now().UTC().Format(time.RFC3339Nano), missed))
	if err := chromedp.Do(tctx, chromedp.Click(`#tail-start`, chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	poll("the event published while stopped", fmt.Sprintf(`(t => t.includes(%q) && t)(document.querySelector("#tail-table tbody").textContent)`, missed))
	if after := poll("the tail's resume position", `window.eventide.tail.resumedAfter`); after != lastSeen {
		t.Errorf("the tail resumed after event %q, want after the last one it showed, %q", after, lastSeen)
	}
	if err := chromedp.Do(tctx, chromedp.Click(`#tail-stop`, chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}

	// The tail's Server-Sent Events parser, over one stream with every
	// field, each line ending and random chunkings (splitting \r\n pairs
	// and UTF-8 sequences), dispatches what EventSource would.
	if got, err := chromedp.Run(tctx, chromedp.Evaluate[string](sseParserCheck, chromedp.EvalAwaitPromise)); err != nil || got != "ok" {
		t.Errorf("the tail's SSE parser: %s %v", got, err)
	}

	// Every form field has a label.
	if unlabelled := poll("the labels", `JSON.stringify([...document.querySelectorAll("input, select")].filter(e => e.labels.length === 0 && !e.getAttribute("aria-label")).map(e => e.id || e.outerHTML))`); unlabelled != "[]" {
		t.Errorf("form fields without a label: %s", unlabelled)
	}

	// A new tab holds no token: the page says it needs one, and works
	// once it is typed into its field. (Its console is not watched: the
	// first requests' 401s are logged as failed loads.)
	tab, tabCancel := chromedp.NewContext(bctx)
	defer tabCancel()
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	tabCtx, tabTimeout := context.WithTimeout(tab, 30*time.Second)
	defer tabTimeout()
	if err := chromedp.Do(tabCtx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	pollIn(tabCtx, "the token prompt", `(e => !e.hidden && e.textContent)(document.querySelector("#auth-needed"))`)
	if err := chromedp.Do(tabCtx,
		chromedp.SendKeys(`#token`, token, chromedp.NodeVisible),
		chromedp.Click(`#token-form button[type=submit]`, chromedp.NodeVisible),
	); err != nil {
		t.Fatal(err)
	}
	pollIn(tabCtx, "the chart after the token", `(c => c && c.data[0].length > 0 && document.querySelector("#auth-needed").hidden && "ok")(window.eventide.charts.rates)`)

	if problems := log.list(); len(problems) > 0 {
		t.Errorf("the page logged %d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// sseParserCheck runs the page's SSE parser (window.eventide.readEvents)
// over 300 seeded random chunkings of one stream, with \n, \r\n and \r
// line endings, and answers "ok" or the first difference from the events
// the WHATWG grammar dispatches.
const sseParserCheck = `(async () => {
	const lines = [": heartbeat", "retry: 1500", "id: 7", 'data: {"a":"café ✓"}', "",
		"event: reset", 'data: {"reason":"position_too_old"}', "data: second line", "",
		"id: 8", "data:no space", "", "id: 9", "", "data: trailing", "", "data: unterminated"];
	const want = JSON.stringify([
		{event: "message", id: "7", data: '{"a":"café ✓"}'},
		{event: "reset", id: "7", data: '{"reason":"position_too_old"}\nsecond line'},
		{event: "message", id: "8", data: "no space"},
		{event: "message", id: "9", data: "trailing"}]);
	let seed = 42;
	const rand = n => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
	for (let round = 0; round < 300; round++) {
		const eol = ["\n", "\r\n", "\r"][round % 3];
		const bytes = new TextEncoder().encode(lines.join(eol));
		const chunks = [];
		for (let i = 0; i < bytes.length; ) { const n = 1 + rand(round % 2 ? 4 : 40); chunks.push(bytes.slice(i, i + n)); i += n; }
		const body = new ReadableStream({start(c) { chunks.forEach(x => c.enqueue(x)); c.close(); }});
		const got = [], st = {lastId: "5"};
		let retry = 0;
		await window.eventide.readEvents(body, st, e => got.push(e), ms => { retry = ms; });
		if (JSON.stringify(got) !== want || retry !== 1500 || st.lastId !== "9") {
			return "round " + round + " (" + JSON.stringify(eol) + "): events " + JSON.stringify(got) + ", retry " + retry + ", last id " + st.lastId;
		}
	}
	return "ok";
})()`

// bearerTransport sends the token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
