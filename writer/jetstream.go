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
		if err := w.checkAckFloor(ctx, w.cons.CachedInfo()); err != nil {
			return err
		}
		if _, err := w.js.ResetConsumerToSequence(ctx, w.cfg.Stream, w.cfg.Consumer, w.ckpt.seq+1); err != nil {
			return fmt.Errorf("cannot reset consumer %s to stream sequence %d: %w", w.cfg.Consumer, w.ckpt.seq+1, err)
		}
	} else {
		w.log.Warn("writer: the NATS server is older than 2.14 and cannot reset a consumer; recreating it, "+
			"which redelivers the stream from its start (messages up to the checkpoint are skipped)",
			"server_version", w.nc.ConnectedServerVersion(), "checkpoint", w.ckpt.seq)
		if info, err := w.cons.Info(ctx); err == nil {
			if err := w.checkAckFloor(ctx, info); err != nil {
				return err
			}
		}
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

// checkAckFloor compares the consumer's acknowledged floor with the
// checkpoint, before the consumer is repositioned after the checkpoint.
// A floor above the checkpoint means messages were acked that storage does
// not hold: the storage directory was replaced by an older copy or a fresh
// one while JetStream kept the consumer. Those the stream still holds are
// redelivered by the reposition (logged at WARN); those retention already
// removed (work-queue or interest retention, max age) are lost to
// storage: logged at ERROR, counted, and reported by Health until the
// process restarts.
func (w *Writer) checkAckFloor(ctx context.Context, info *jetstream.ConsumerInfo) error {
	if info == nil || info.AckFloor.Stream <= w.ckpt.seq {
		return nil
	}
	floor := info.AckFloor.Stream
	s, err := w.js.Stream(ctx, w.cfg.Stream)
	if err != nil {
		return fmt.Errorf("cannot read stream %s to check the consumer's ack floor: %w", w.cfg.Stream, err)
	}
	st := s.CachedInfo().State
	firstHeld := st.FirstSeq
	if st.Msgs == 0 {
		firstHeld = st.LastSeq + 1
	}
	from := w.ckpt.seq + 1
	if firstHeld > from {
		lost := ackedUnstored{first: from, last: min(floor, firstHeld-1)}
		w.reportLost(lost)
		from = lost.last + 1
	}
	if floor >= from {
		w.log.Warn("writer: the consumer acknowledged messages that storage does not hold (the storage directory is "+
			"older than the NATS state); redelivering them from the stream", "consumer", w.cfg.Consumer,
			"checkpoint", w.ckpt.seq, "ack_floor", floor, "redelivered", floor-from+1, "first_seq", from)
	}
	return nil
}

// ackedUnstored is a range of stream sequences that JetStream saw acked
// but storage does not hold, and the stream no longer has.
type ackedUnstored struct{ first, last uint64 }

func (r ackedUnstored) String() string { return fmt.Sprintf("%d-%d", r.first, r.last) }

// reportLost logs, counts and remembers for Health a range of messages
// acked but not stored; a range already reported is not counted again.
func (w *Writer) reportLost(r ackedUnstored) {
	w.lostMu.Lock()
	defer w.lostMu.Unlock()
	newFirst := r.first
	switch {
	case w.lost.last == 0:
		w.lost = r
	case r.last <= w.lost.last:
		return
	default:
		newFirst = max(r.first, w.lost.last+1)
		w.lost.last = r.last
	}
	w.m.ackedUnstored.Add(float64(r.last - newFirst + 1))
	w.log.Error("writer: messages were acknowledged to JetStream but are not in storage, and the stream no longer "+
		"holds them (work-queue or interest retention, max age): they are lost to this storage. The storage directory "+
		"was most likely replaced by an older copy or a fresh one; restore the matching one, or replay from another copy",
		"consumer", w.cfg.Consumer, "stream", w.cfg.Stream, "lost_first_seq", r.first, "lost_last_seq", r.last,
		"count", r.last-r.first+1)
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
