// Command query will serve Eventide's HTTP API (docs/http-api.md) apart
// from ingestion. It cannot yet: the storage engine is single-process (one
// process per data directory, held by its LOCK file), and querying shards
// owned by other processes over NATS request/reply is still to come. Until
// then, cmd/ingest serves the same API from the process that writes.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprint(os.Stderr, `eventide query: not supported as a separate process yet.
The storage engine allows one process per data directory, so the HTTP API is
served by the process that ingests:

  go run ./cmd/ingest --data ./data     # HTTP API on 127.0.0.1:8080

See docs/http-api.md.
`)
	os.Exit(2)
}
