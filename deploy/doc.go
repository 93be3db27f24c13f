// Package deploy holds Eventide's deployment files (deploy/README.md): the
// NATS cluster configs, the Dockerfile and compose file, Kubernetes
// manifests, systemd units, Prometheus scrape config and alert rules, and
// Grafana provisioning, and local-cluster.sh, which runs the same on one
// machine without containers. It has no Go code; its tests check offline what
// can be checked without Docker or a cluster: every file parses, the NATS
// configs are accepted by nats-server's own parser and form a working
// secured cluster, the files compose.yaml mounts exist, every flag and
// EVENTIDE_* variable the files pass exists in the binaries, and every
// metric the alerts and the dashboard name is served on a running
// cmd/ingest's /metrics; cmd/ingest works on the cluster the configs make,
// and so does the script.
package deploy
