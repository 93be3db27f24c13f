// Package deploy holds Eventide's deployment files (deploy/README.md): the
// NATS cluster configs, the Dockerfile and compose file, Kubernetes
// manifests, systemd units, Prometheus scrape config and alert rules, and
// Grafana provisioning. It has no Go code; its tests check offline what
// can be checked without Docker or a cluster: every file parses, the NATS
// configs are accepted by nats-server's own parser and form a working
// secured cluster, the files compose.yaml mounts exist, every flag and
// EVENTIDE_* variable the files pass exists in the binaries, and every
// metric the alerts and the dashboard name is served on a running
// cmd/ingest's /metrics.
package deploy
