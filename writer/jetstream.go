package writer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ensureStreams creates or updates the event and dead-letter streams and
// returns the event stream's state.
func (w *Writer) ensureStreams(ctx context.Context) (jetstream.StreamState, error) {
	retention, _ := parseRetention(w.cfg.Retention) // checked by withDefaults
	events := jetstream.StreamConfig{
		Name:      w.cfg.Stream,
		Subjects:  w.cfg.Subjects,
		Retention: retention,
		MaxAge:    w.cfg.MaxAge,
		Replicas:  w.cfg.Replicas,
		Storage:   jetstream.FileStorage,
	}
	s, err := w.js.CreateOrUpdateStream(ctx, events)
	if err != nil {
		return jetstream.StreamState{}, fmt.Errorf("cannot create or update stream %s: %w", w.cfg.Stream, err)
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
		return jetstream.StreamState{}, fmt.Errorf("cannot create or update dead-letter stream %s: %w", w.cfg.DLQStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return jetstream.StreamState{}, fmt.Errorf("cannot read state of stream %s: %w", w.cfg.Stream, err)
	}
	return info.State, nil
}

func (w *Writer) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       w.cfg.Consumer,
		Description:   "eventide writer: validates events and stores them",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: 2 * w.cfg.FetchBatch,
	}
}

func (w *Writer) ensureConsumer(ctx context.Context) error {
	c, err := w.js.CreateOrUpdateConsumer(ctx, w.cfg.Stream, w.consumerConfig())
	if err != nil {
		return fmt.Errorf("cannot create or update consumer %s on stream %s: %w", w.cfg.Consumer, w.cfg.Stream, err)
	}
	w.cons = c
	return nil
}

// repositionConsumer makes the consumer deliver from the message after the
// checkpoint, with nothing outstanding: deliveries made earlier (to a
// previous process, or lost on the wire) are forgotten rather than left to
// come back after the checkpoint has moved past them. Deliveries then
// restart at consumer sequence 1. Servers before 2.14 cannot reset a
// consumer; there the consumer is recreated, which redelivers the stream
// from its start and skips what the checkpoint covers.
func (w *Writer) repositionConsumer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if w.consumerResetSupported {
		// The reset request is answered by the consumer itself: if it was
		// deleted from outside, nothing would answer. Create it first.
		if err := w.ensureConsumer(ctx); err != nil {
			return err
		}
		if _, err := w.js.ResetConsumerToSequence(ctx, w.cfg.Stream, w.cfg.Consumer, w.ckpt.seq+1); err != nil {
			return fmt.Errorf("cannot reset consumer %s to stream sequence %d: %w", w.cfg.Consumer, w.ckpt.seq+1, err)
		}
	} else {
		w.log.Warn("writer: the NATS server is older than 2.14 and cannot reset a consumer; recreating it, "+
			"which redelivers the stream from its start (messages up to the checkpoint are skipped)",
			"server_version", w.nc.ConnectedServerVersion(), "checkpoint", w.ckpt.seq)
		if err := w.js.DeleteConsumer(ctx, w.cfg.Stream, w.cfg.Consumer); err != nil && !isNotFound(err) {
			return fmt.Errorf("cannot delete consumer %s to restart it: %w", w.cfg.Consumer, err)
		}
		if err := w.ensureConsumer(ctx); err != nil {
			return err
		}
	}
	w.nextDeliverySeq = 1
	w.m.consumerResets.Inc()
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, jetstream.ErrConsumerNotFound) }

// serverAtLeast reports whether a server version "x.y.z[-suffix]" is at
// least major.minor.
func serverAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
