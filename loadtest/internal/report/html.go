package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"strings"
)

// The chart library, vendored from the npm package uplot (see
// vendor/uplot/VERSION and update.sh) so the report works offline.
var (
	//go:embed vendor/uplot/uPlot.iife.min.js
	uplotJS string
	//go:embed vendor/uplot/uPlot.min.css
	uplotCSS string
)

// DataElementID is the id of the <script type="application/json"> element
// holding the report's JSON in the HTML report.
const DataElementID = "report-data"

// HTML returns the single-file HTML report: the summary, charts of
// latency over time, throughput and (when spawned) the server's RSS and
// CPU, drawn by the embedded uPlot from the report's JSON inline.
func (r *Report) HTML() ([]byte, error) {
	// encoding/json escapes <, > and & in strings, so the data cannot
	// close its script element.
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the report's data: %w", err)
	}
	var summary strings.Builder
	r.WriteSummary(&summary)
	var b strings.Builder
	fmt.Fprintf(&b, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Eventide load test %s</title>
<style>%s</style>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
h2 { margin-top: 1.5em; }
.chart { margin: 1em 0; }
</style>
<script>%s</script>
</head>
<body>
<h1>Eventide load test %s</h1>
<pre id="summary">%s</pre>
<h2>Throughput (operations finished per second)</h2>
<div id="throughput" class="chart"></div>
<h2>Latency over time (from intended start)</h2>
<div id="latency"></div>
<div id="server-section"></div>
<script type="application/json" id="%s">%s</script>
<script>
(function () {
  const r = JSON.parse(document.getElementById(%q).textContent);
  const width = Math.min(1100, window.innerWidth - 60);
  const kinds = Object.keys(r.series || {}).sort();
  function rates(s) {
    const out = [];
    for (let i = 0; i < s.t.length; i++) {
      const dt = i === 0 ? s.t[0] : s.t[i] - s.t[i - 1];
      out.push(dt > 0 ? s.count[i] / dt : 0);
    }
    return out;
  }
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  if (kinds.length > 0) {
    const tables = kinds.map(k => [r.series[k].t, rates(r.series[k])]);
    const joined = uPlot.join(tables);
    new uPlot({
      width: width, height: 300,
      scales: { x: { time: false } },
      axes: [{ label: "seconds since start" }, { label: "ops/s" }],
      series: [{}].concat(kinds.map((k, i) => ({ label: k, stroke: palette[i %% palette.length], spanGaps: true }))),
    }, joined, document.getElementById("throughput"));
  }
  for (const k of kinds) {
    const s = r.series[k];
    const div = document.createElement("div");
    div.className = "chart";
    document.getElementById("latency").appendChild(div);
    const ms = a => a.map(v => v * 1000);
    new uPlot({
      title: k, width: width, height: 240,
      scales: { x: { time: false } },
      axes: [{ label: "seconds since start" }, { label: "ms" }],
      series: [{}, { label: "p50", stroke: "#1f77b4" }, { label: "p99", stroke: "#ff7f0e" }, { label: "max", stroke: "#d62728" }],
    }, [s.t, ms(s.p50), ms(s.p99), ms(s.max)], div);
  }
  if (r.server && r.server.t && r.server.t.length > 1) {
    const sec = document.getElementById("server-section");
    sec.innerHTML = "<h2>Server (spawned): RSS and CPU</h2>";
    const div = document.createElement("div");
    sec.appendChild(div);
    const cores = r.server.cpu_seconds.map((c, i) => i === 0 ? 0 : (c - r.server.cpu_seconds[i - 1]) / (r.server.t[i] - r.server.t[i - 1]));
    new uPlot({
      width: width, height: 260,
      scales: { x: { time: false }, mib: {}, cores: {} },
      axes: [{ label: "seconds since start" }, { scale: "mib", label: "RSS MiB" }, { scale: "cores", side: 1, label: "CPU cores", grid: { show: false } }],
      series: [{}, { label: "RSS MiB", scale: "mib", stroke: "#1f77b4" }, { label: "CPU cores", scale: "cores", stroke: "#d62728" }],
    }, [r.server.t, r.server.rss_bytes.map(b => b / 1048576), cores], div);
    const c = r.server.counters;
    if (c && c["eventide_storage_compaction_written_bytes_total"]) {
      const per = a => a.map((v, i) => i === 0 ? 0 : v - a[i - 1]);
      const div2 = document.createElement("div");
      sec.appendChild(div2);
      new uPlot({
        title: "storage work per sample: set latency spikes against it", width: width, height: 240,
        scales: { x: { time: false }, mb: {}, n: {} },
        axes: [{ label: "seconds since start" }, { scale: "mb", label: "MB" }, { scale: "n", side: 1, label: "count", grid: { show: false } }],
        series: [{}, { label: "compaction MB written", scale: "mb", stroke: "#9467bd" },
          { label: "compactions", scale: "n", stroke: "#2ca02c" }, { label: "flushes", scale: "n", stroke: "#8c564b" },
          { label: "write stalls", scale: "n", stroke: "#d62728" }],
      }, [r.server.t, per(c["eventide_storage_compaction_written_bytes_total"]).map(b => b / 1e6),
        per(c["eventide_storage_compactions_total"]), per(c["eventide_storage_flushes_total"]),
        per(c["eventide_storage_write_stalls_total"])], div2);
    }
  }
})();
</script>
</body>
</html>
`, html.EscapeString(r.Run), uplotCSS, uplotJS, html.EscapeString(r.Run), html.EscapeString(summary.String()), DataElementID, data, DataElementID)
	return []byte(b.String()), nil
}

// WriteHTML writes the HTML report to path.
func (r *Report) WriteHTML(path string) error {
	b, err := r.HTML()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cannot write the HTML report: %w", err)
	}
	return nil
}
