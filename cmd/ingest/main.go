// Command ingest runs Eventide. For now it opens (and recovers) the
// storage engine in the data directory, prints its state and keeps it open
// until SIGINT or SIGTERM; the NATS pipeline and HTTP API join it in later
// issues.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/eventide/eventide/storage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "eventide:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data", envOr("EVENTIDE_DATA", "./data"), "data directory (env EVENTIDE_DATA)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	opts := storage.DefaultOptions()
	opts.Logger = logger
	db, err := storage.Open(*dataDir, opts)
	if err != nil {
		return err
	}
	logger.Info("eventide started", "data", *dataDir)
	fmt.Fprint(os.Stderr, db.Metrics())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	stop()
	logger.Info("shutting down: flushing storage")
	if err := db.Flush(); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
