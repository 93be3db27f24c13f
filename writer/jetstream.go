package writer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ensureStreams creates or updates the event and dead-letter streams.
func (w *Writer) ensureStreams(ctx context.Context) error {
	retention, _ := parseRetention(w.cfg.Retention) // checked by withDefaults
	events := jetstream.StreamConfig{
		Name:      w.cfg.Stream,
		Subjects:  w.cfg.Subjects,
		Retention: retention,
		MaxAge:    w.cfg.MaxAge,
		Replicas:  w.cfg.Replicas,
		Storage:   jetstream.FileStorage,
	}
	_, err := w.js.CreateOrUpdateStream(ctx, events)
	if err != nil {
		return fmt.Errorf("cannot create or update stream %s: %w", w.cfg.Stream, err)
	}
	dup := dlqDuplicateWindow
	if w.cfg.MaxAge > 0 && w.cfg.MaxAge < dup {
		dup = w.cfg.MaxAge
	}
	dlq := jetstream.StreamConfig{
		Name:       w.cfg.DLQStream,
		Subjects:   []string{DLQSubjects},
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     w.cfg.MaxAge,
		Replicas:   w.cfg.Replicas,
		Storage:    jetstream.FileStorage,
		Duplicates: dup,
	}
	if _, err := w.js.CreateOrUpdateStream(ctx, dlq); err != nil {
		return fmt.Errorf("cannot create or update dead-letter stream %s: %w", w.cfg.DLQStream, err)
	}
	return nil
}
