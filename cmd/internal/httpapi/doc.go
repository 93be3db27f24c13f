// Package httpapi is Eventide's HTTP API as the commands serve it: the
// query endpoints (/v1/events, /v1/events/{id}, /v1/counts, /v1/types/top,
// /v1/slice), the live tail (/v1/events/stream, Server-Sent Events from a
// TailSource), storage statistics (/v1/stats, from a StatsSource), the
// dead-letter listing
// (/v1/dlq, read from the JetStream dead-letter stream), the health
// endpoints (/livez, /readyz), the Prometheus registry and /metrics,
// /openapi.yaml, the spec of all of them (package api), and the built-in
// dashboard at / and /ui/{asset} (package dashboard, its own files). The
// embedded NATS server is package internal/natsembed's.
//
// It is wiring, not logic: queries are planned and run by package reader,
// events are written by package writer; this package turns HTTP requests
// into reader queries and reader results into JSON. Its contract with
// clients is docs/http-api.md and api/openapi.yaml, and the three change
// together: the tests fail when the route table (routeTable) and the
// spec's paths differ, and validate every request and response of the API
// tests against the spec (kin-openapi, test-only).
//
// Use:
//
//	reg := httpapi.NewRegistry()                  // Go and process collectors
//	health := httpapi.NewHealth()                 // add a check per dependency
//	health.Add("storage", func() error { ... })      // readiness: nil or the cause
//	health.AddLiveness("storage", func() error { ... }) // fails only when a restart is needed
//	dl, err := httpapi.NewDeadLetters(js, "EVENTS_DLQ", reg)  // optional: /v1/dlq
//	fresh := httpapi.FreshnessFunc(func() []httpapi.ShardFreshness { ... }) // from the writer's Stats
//	stats := httpapi.StatsFunc(func(ctx context.Context) (httpapi.Stats, error) { ... }) // optional: /v1/stats
//	lt := tail.New(tail.Options{}, checkpoint)     // optional: /v1/events/stream; writer.Config.OnStored = lt.WriterHook()
//	h, err := httpapi.NewHandler(httpapi.Config{Reader: r, DeadLetters: dl, Health: health, Registry: reg, Freshness: fresh, Stats: stats, Tail: lt})
//	srv := &http.Server{Handler: h, ConnContext: httpapi.ConnContext} // optional, with
//	srv.Serve(httpapi.HoldingListener(ln))                            // large answers in one write (sendonce.go)
//
// Invariants:
//   - Every error response is application/problem+json (RFC 9457) whose
//     detail tells the client what to change; server-side failures get a
//     generic detail with an error id, and the log gets the cause.
//   - Every data response (events, counts, timeline, follow lists) carries
//     "freshness" when Config gives a FreshnessSource: per shard, the
//     stream sequence and time its consumer has applied and how many
//     messages it is behind, read before the query runs.
//   - With Config.Token, every path but /livez, /readyz, /openapi.yaml and
//     the dashboard's static page and files needs "Authorization: Bearer
//     <token>" (401 otherwise). CORS headers
//     are sent only to Config.CORSOrigins. Every data route runs under its
//     timeout parameter (at most Config.MaxQueryTimeout) as its context's
//     deadline, and answers 503 query-timeout when that runs out.
//   - With Config.Partial (cmd/query, whose store spans storage nodes),
//     a data request runs under the tracker's context: shards that did not
//     answer make the answer say "partial": true with "missing_shards",
//     or, when the request says complete=true, a 503 partial-answer.
//     Without it every answer is whole and complete=true changes nothing.
//   - Parameters are strict: unknown or repeated parameters are refused,
//     so a typo never silently falls back to a default. The one exception
//     is type on /v1/counts and /v1/events/stream, repeated to name
//     several types (each at most once).
//   - The live tail runs outside the timeout (a stream lasts until the
//     client leaves) but inside the token and CORS guards; each client's
//     memory is bounded by the tail (internal/tail), which drops a slow
//     client rather than wait for it.
package httpapi
