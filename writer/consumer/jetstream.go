package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func (c *Consumer) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        c.cfg.Durable,
		Description:    c.cfg.Description,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      c.ackPolicy(),
		AckWait:        c.cfg.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  2 * c.cfg.FetchBatch,
		FilterSubjects: c.cfg.FilterSubjects,
	}
}

// ackPolicy is the durable consumer's ack policy: AckAll (one ack per
// stored batch, for its last delivery) where the stream allows it, and
// AckExplicit (every delivery acked) on work-queue streams, whose
// consumers the server requires to ack explicitly, and on interest
// streams, whose existing consumers cannot be recreated safely (see
// upgradeAckPolicy). doc.go says why acking only a batch's last delivery
// is exactly-once safe.
func (c *Consumer) ackPolicy() jetstream.AckPolicy {
	if c.ackAll {
		return jetstream.AckAllPolicy
	}
	return jetstream.AckExplicitPolicy
}

func (c *Consumer) ensureConsumer(ctx context.Context) error {
	if c.ackAll {
		if err := c.upgradeAckPolicy(ctx); err != nil {
			return err
		}
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, c.cfg.Stream, c.consumerConfig())
	if err != nil {
		return fmt.Errorf("cannot create or update consumer %s on stream %s: %w", c.cfg.Durable, c.cfg.Stream, err)
	}
	c.cons = cons
	return nil
}

// upgradeAckPolicy deletes the durable consumer if it exists with another
// ack policy than AckAll (one created by an earlier version, which acked
// every message explicitly): the server refuses to change a consumer's ack
// policy on update. Nothing is lost by it on a limits stream: the stream
// keeps every message, the checkpoint says what is stored, and the
// consumer created in its place is repositioned after the checkpoint
// before anything is fetched (Run starts with a reposition). The old
// consumer's ack floor is checked against the checkpoint first, as before
// any reposition, since the new consumer will not have it. Only limits
// streams get here: deleting the only consumer of an interest stream would
// delete the messages it had not acked yet.
func (c *Consumer) upgradeAckPolicy(ctx context.Context) error {
	old, err := c.js.Consumer(ctx, c.cfg.Stream, c.cfg.Durable)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read consumer %s on stream %s: %w", c.cfg.Durable, c.cfg.Stream, err)
	}
	info := old.CachedInfo()
	if info.Config.AckPolicy == jetstream.AckAllPolicy {
		return nil
	}
	if err := c.checkAckFloor(ctx, info); err != nil {
		return err
	}
	c.log.Info("consumer: recreating the durable consumer to ack once per stored batch (ack policy all); "+
		"it is repositioned after the checkpoint, so nothing is skipped or stored twice",
		"consumer", c.cfg.Durable, "stream", c.cfg.Stream, "old_ack_policy", info.Config.AckPolicy.String(),
		"checkpoint", c.ckpt.Seq)
	if err := c.js.DeleteConsumer(ctx, c.cfg.Stream, c.cfg.Durable); err != nil && !isNotFound(err) {
		return fmt.Errorf("cannot delete consumer %s to change its ack policy: %w", c.cfg.Durable, err)
	}
	return nil
}

// repositionConsumer makes the consumer deliver from the message after the
// checkpoint, with nothing outstanding: deliveries made earlier (to a
// previous process, or lost on the wire) are forgotten rather than left to
// come back after the checkpoint has moved past them. Deliveries then
// restart at consumer sequence 1. Servers before 2.14 cannot reset a
// consumer; there the consumer is recreated, which redelivers the stream
// from its start and skips what the checkpoint covers.
func (c *Consumer) repositionConsumer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Deliveries for pull requests sent before the reposition must not be
	// taken for the new ones, which restart at consumer sequence 1: a new
	// inbox, whose old one the server stops delivering to before it
	// handles the reposition (one connection keeps the order).
	if err := c.pull.reset(); err != nil {
		return err
	}
	if c.resetOK {
		// The reset request is answered by the consumer itself: if it was
		// deleted from outside, nothing would answer. Create it first.
		if err := c.ensureConsumer(ctx); err != nil {
			return err
		}
		if err := c.checkAckFloor(ctx, c.cons.CachedInfo()); err != nil {
			return err
		}
		if _, err := c.js.ResetConsumerToSequence(ctx, c.cfg.Stream, c.cfg.Durable, c.ckpt.Seq+1); err != nil {
			return fmt.Errorf("cannot reset consumer %s to stream sequence %d: %w", c.cfg.Durable, c.ckpt.Seq+1, err)
		}
	} else {
		c.log.Warn("consumer: the NATS server is older than 2.14 and cannot reset a consumer; recreating it, "+
			"which redelivers the stream from its start (messages up to the checkpoint are skipped)",
			"server_version", c.nc.ConnectedServerVersion(), "checkpoint", c.ckpt.Seq)
		if info, err := c.cons.Info(ctx); err == nil {
			if err := c.checkAckFloor(ctx, info); err != nil {
				return err
			}
		}
		if err := c.js.DeleteConsumer(ctx, c.cfg.Stream, c.cfg.Durable); err != nil && !isNotFound(err) {
			return fmt.Errorf("cannot delete consumer %s to restart it: %w", c.cfg.Durable, err)
		}
		if err := c.ensureConsumer(ctx); err != nil {
			return err
		}
	}
	c.nextDeliverySeq = 1
	c.m.Resets.Inc()
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
func (c *Consumer) checkAckFloor(ctx context.Context, info *jetstream.ConsumerInfo) error {
	if info == nil || info.AckFloor.Stream <= c.ckpt.Seq {
		return nil
	}
	floor := info.AckFloor.Stream
	s, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return fmt.Errorf("cannot read stream %s to check the consumer's ack floor: %w", c.cfg.Stream, err)
	}
	st := s.CachedInfo().State
	firstHeld := st.FirstSeq
	if st.Msgs == 0 {
		firstHeld = st.LastSeq + 1
	}
	from := c.ckpt.Seq + 1
	if firstHeld > from {
		lost := ackedUnstored{first: from, last: min(floor, firstHeld-1)}
		c.reportLost(lost)
		from = lost.last + 1
	}
	if floor >= from {
		c.log.Warn("consumer: the consumer acknowledged messages that storage does not hold (the storage directory is "+
			"older than the NATS state); redelivering them from the stream", "consumer", c.cfg.Durable,
			"checkpoint", c.ckpt.Seq, "ack_floor", floor, "redelivered", floor-from+1, "first_seq", from)
	}
	return nil
}

// ackedUnstored is a range of stream sequences that JetStream saw acked
// but storage does not hold, and the stream no longer has.
type ackedUnstored struct{ first, last uint64 }

func (r ackedUnstored) String() string { return fmt.Sprintf("%d-%d", r.first, r.last) }

// reportLost logs, counts and remembers for Health a range of messages
// acked but not stored; a range already reported is not counted again.
func (c *Consumer) reportLost(r ackedUnstored) {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	newFirst := r.first
	switch {
	case c.lost.last == 0:
		c.lost = r
	case r.last <= c.lost.last:
		return
	default:
		newFirst = max(r.first, c.lost.last+1)
		c.lost.last = r.last
	}
	c.m.AckedUnstored.Add(float64(r.last - newFirst + 1))
	// Storage loses acknowledged batches in two ways: recovery cut a
	// damaged final WAL record (it says so in its own WARN and in
	// Recovery), or the directory was swapped for an older copy.
	cause := "The storage directory was most likely replaced by an older copy or a fresh one; restore the matching one, or replay from another copy"
	if rec := c.db.Recovery(); rec.CutBytes > 0 {
		cause = fmt.Sprintf("At open, storage cut %d damaged bytes from the end of WAL segment %d (%s): the batch they held had been acknowledged. Check the disk; replay from another copy",
			rec.CutBytes, rec.CutSegment, rec.CutReason)
	}
	c.log.Error("consumer: messages were acknowledged to JetStream but are not in storage, and the stream no longer "+
		"holds them (work-queue or interest retention, max age): they are lost to this storage. "+cause,
		"consumer", c.cfg.Durable, "stream", c.cfg.Stream, "lost_first_seq", r.first, "lost_last_seq", r.last,
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
