// Package server holds what Eventide's commands share to serve: the HTTP
// API (/v1/events, /v1/counts), the health endpoints (/livez, /readyz),
// the Prometheus registry and /metrics, and the embedded NATS server.
//
// It is wiring, not logic: queries are planned and run by package reader,
// events are written by package writer; this package turns HTTP requests
// into reader queries and reader results into JSON. Its contract with
// clients is docs/http-api.md, and the two change together.
//
// Use:
//
//	reg := server.NewRegistry()                  // Go and process collectors
//	health := server.NewHealth()                 // add a check per dependency
//	health.Add("storage", func() error { ... })
//	h, err := server.NewHandler(server.Config{Reader: r, Health: health, Registry: reg})
//	ns, err := server.StartNATS(server.NATSConfig{Listen: "127.0.0.1:4222", StoreDir: dir})
//
// Invariants:
//   - Every error response is application/problem+json (RFC 9457) whose
//     detail tells the client what to change; server-side failures get a
//     generic detail with an error id, and the log gets the cause.
//   - Parameters are strict: unknown or repeated parameters are refused,
//     so a typo never silently falls back to a default.
package server
