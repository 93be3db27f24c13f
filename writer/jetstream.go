package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoJetStream is returned by New when the NATS server does not run
// JetStream.
var ErrNoJetStream = errors.New("the NATS server does not have JetStream enabled; enable JetStream " +
	"(nats-server -js, or a jetstream {} block in its configuration)")

// ErrReplicasUnsupported is returned by New when Config.Replicas is more
// than 1 and the NATS server is not part of a JetStream cluster: a
// configuration error (cmd/ingest exits with 2).
var ErrReplicasUnsupported = errors.New("more than 1 replica needs a clustered NATS JetStream")

// EnsureStreams creates or updates the event and dead-letter streams of
// cfg, as New does, without a consumer: a node of a sharded deployment
// that owns no shard yet still needs them (its fan-out worker reads the
// stream).
func EnsureStreams(ctx context.Context, nc *nats.Conn, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("writer: cannot use JetStream: %w", err)
	}
	return (&Writer{cfg: cfg, js: js}).ensureStreams(ctx)
}

// ensureStreams creates or updates the event and dead-letter streams. If
// it created the event stream and then cannot create the dead-letter
// stream, it deletes the event stream again, so that a failed start leaves
// nothing half made.
func (w *Writer) ensureStreams(ctx context.Context) error {
	_, err := w.js.Stream(ctx, w.cfg.Stream)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return w.streamError(w.cfg.Stream, "cannot read stream", err)
	}
	created := err != nil
	retention, _ := parseRetention(w.cfg.Retention) // checked by withDefaults
	events := jetstream.StreamConfig{
		Name:      w.cfg.Stream,
		Subjects:  w.cfg.Subjects,
		Retention: retention,
		MaxAge:    w.cfg.MaxAge,
		Replicas:  w.cfg.Replicas,
		Storage:   jetstream.FileStorage,
	}
	if w.cfg.sharded() {
		prefix, _ := w.cfg.shardPrefix() // checked by withDefaults
		tr := SubjectTransform(prefix, w.cfg.Shards)
		events.SubjectTransform = &tr
	}
	if _, err := w.js.CreateOrUpdateStream(ctx, events); err != nil {
		return w.streamError(w.cfg.Stream, "cannot create or update stream", err)
	}
	dup := dlqDuplicateWindow
	if w.cfg.MaxAge > 0 && w.cfg.MaxAge < dup {
		dup = w.cfg.MaxAge
	}
	dlq := jetstream.StreamConfig{
		Name:       w.cfg.DLQStream,
		Subjects:   []string{w.cfg.DLQSubjects()},
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     w.cfg.MaxAge,
		Replicas:   w.cfg.Replicas,
		Storage:    jetstream.FileStorage,
		Duplicates: dup,
	}
	if _, err := w.js.CreateOrUpdateStream(ctx, dlq); err != nil {
		err = w.streamError(w.cfg.DLQStream, "cannot create or update dead-letter stream", err)
		if created {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if derr := w.js.DeleteStream(dctx, w.cfg.Stream); derr != nil && !errors.Is(derr, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("%w (and the stream %s this start created could not be deleted again: %v)", err, w.cfg.Stream, derr)
			}
		}
		return err
	}
	return nil
}

// streamError describes a failed stream request, with the sentinel errors
// for a server without JetStream and for replicas it cannot provide.
func (w *Writer) streamError(stream, what string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("%w: %s %s: %w", ErrNoJetStream, what, stream, err)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeReplicasNotSupported:
		return fmt.Errorf("%w: --replicas %d on a NATS server that is not in a cluster; use 1, or a JetStream cluster: %s %s: %w",
			ErrReplicasUnsupported, w.cfg.Replicas, what, stream, err)
	}
	return fmt.Errorf("%s %s: %w", what, stream, err)
}

// jsErrCodeReplicasNotSupported is the server's JSStreamReplicasNotSupportedErr
// ("replicas > 1 not supported in non-clustered mode"); nats.go names no
// constant for it.
const jsErrCodeReplicasNotSupported jetstream.ErrorCode = 10074
