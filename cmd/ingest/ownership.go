package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/queryrpc"
)

// ownership decides which shards this node's writers apply: the static
// --own-shards, or, with --owners-kv, the shard owners bucket
// (queryrpc's ownership protocol), watched for the node's life.
type ownership struct {
	cancel    context.CancelFunc
	done      chan struct{}
	leaseDone chan struct{} // keepLease's, with --node-lease
}

// startOwnership starts the writers of the shards this node owns now;
// with --owners-kv it first claims the --own-shards that have no owner,
// and keeps watching the bucket, starting and stopping shard writers as
// shards move.
func (n *node) startOwnership(ctx context.Context) error {
	sc := n.cfg.Shard
	if sc.OwnersKV == "" {
		for _, s := range sc.Own {
			if err := n.shards.start(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	js, err := jetstream.New(n.nc)
	if err != nil {
		return fmt.Errorf("cannot use JetStream: %w", err)
	}
	kv, err := queryrpc.OwnersBucket(ctx, js, sc.OwnersKV, n.cfg.Writer.Replicas)
	if err != nil {
		return err
	}
	// The lease goes in before any claim, so that no other node takes
	// this node's shards for want of one.
	var leases jetstream.KeyValue
	if sc.NodeLease > 0 {
		if leases, err = n.openLeases(ctx, js); err != nil {
			return err
		}
	}
	if sc.claim {
		for _, s := range sc.Own {
			owns, err := queryrpc.ClaimShard(ctx, kv, s, sc.NodeID)
			if err != nil {
				return err
			}
			if !owns {
				n.logger.Warn("shard already has another owner in the owners bucket; not taking it", "shard", s, "bucket", sc.OwnersKV)
			}
		}
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o := &ownership{cancel: cancel, done: make(chan struct{})}
	n.ownership = o
	ready := make(chan struct{})
	var once sync.Once
	log := n.logger.With("component", "ownership", "bucket", sc.OwnersKV)
	go func() {
		defer close(o.done)
		err := queryrpc.WatchOwners(wctx, kv, sc.Shards, func(u queryrpc.OwnerUpdate) {
			if u.Shard < 0 {
				once.Do(func() { close(ready) })
				return
			}
			n.applyOwner(wctx, kv, u, log)
		}, func(err error) { log.Warn("ignoring an entry of the owners bucket", "err", err) })
		if err != nil && wctx.Err() == nil {
			n.fail(err)
		}
	}()
	select {
	case <-ready:
		if leases != nil {
			o.leaseDone = make(chan struct{})
			go func() {
				defer close(o.leaseDone)
				n.keepLease(wctx, leases, kv, log.With("lease", sc.NodeLease))
			}()
		}
		return nil
	case <-o.done:
		return fmt.Errorf("the watch of the shard owners bucket %s stopped before it read the owners", sc.OwnersKV)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// applyOwner starts or stops the writer of one shard after a change of
// its owner. A shard moving away is stopped before it is released, so
// its new owner starts only after this node applies nothing more of it.
func (n *node) applyOwner(ctx context.Context, kv jetstream.KeyValue, u queryrpc.OwnerUpdate, log *slog.Logger) {
	me := n.cfg.Shard.NodeID
	switch {
	case !u.Deleted && u.Value.Owner == me && u.Value.MovingTo == "":
		if err := n.shards.start(ctx, u.Shard); err != nil {
			n.fail(err)
		}
	case !u.Deleted && u.Value.Owner == me:
		log.Info("shard moving away: stopping its writer before releasing it", "shard", u.Shard, "to", u.Value.MovingTo)
		n.shards.stop(u.Shard)
		// Until the release lands nobody applies the shard, so it is
		// retried through NATS trouble (leader elections, a reconnect);
		// ErrOwnerChanged means someone else changed it meanwhile.
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := queryrpc.ReleaseShard(rctx, kv, u.Shard, me, u.Value.MovingTo)
			cancel()
			if err == nil {
				log.Info("shard released", "shard", u.Shard, "to", u.Value.MovingTo)
				return
			}
			if errors.Is(err, queryrpc.ErrOwnerChanged) {
				log.Warn("shard changed before this node released it", "shard", u.Shard, "err", err)
				return
			}
			log.Warn("cannot release the shard yet; retrying", "shard", u.Shard, "to", u.Value.MovingTo, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(releaseRetry):
			}
		}
	default:
		n.shards.stop(u.Shard) // another node's, or no one's
	}
}

// releaseRetry is the pause between two attempts to release a shard.
const releaseRetry = 250 * time.Millisecond

// stop ends the watch and waits for it.
func (o *ownership) stop() {
	o.cancel()
	<-o.done
	if o.leaseDone != nil {
		<-o.leaseDone
	}
}
