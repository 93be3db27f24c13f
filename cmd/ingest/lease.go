package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/queryrpc"
)

// Automatic failover (--node-lease).
//
// With --node-lease L a node with --owners-kv keeps a lease: key
// node.<id> in the KV bucket eventide-node-leases, whose TTL is L, put
// before it claims any shard and renewed every L/3. Every L/3 it also
// reads the owners bucket, and each shard whose owner has no lease (the
// owner has not renewed it for L: dead, stopped, or cut off from NATS)
// it takes with queryrpc.ForceOwner, a compare-and-swap on the value it
// read: of several live nodes racing for a shard exactly one gets it, and
// a shard that changed meanwhile is left alone. The new owner rebuilds
// the shard from the stream (or resumes from its checkpoint if it had the
// shard before). A shard with no key in the bucket is left to the node
// that claims it with --own-shards.
//
// Fencing is the owners bucket's: an owner that was only cut off sees,
// once it reads the bucket again, that the shard is no longer its own and
// stops its writer. Until then it may apply the shard to its own store,
// which no query reads any more; nothing is applied twice in the new
// owner's store, which has its own checkpoint.
//
// A lease is not deleted at a clean shutdown: a restart within L keeps
// the node's shards (a takeover costs a rebuild elsewhere), so L should
// exceed a node's restart time.

// nodeLeasesBucket is the KV bucket of node leases.
const nodeLeasesBucket = "eventide-node-leases"

// leaseKey is the lease key of node id.
func leaseKey(node string) string { return "node." + node }

// openLeases creates (or opens) the leases bucket with a TTL of lease and
// puts this node's lease.
func (n *node) openLeases(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	sc := n.cfg.Shard
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      nodeLeasesBucket,
		Description: "eventide: storage node leases (node.<id>), renewed by each live node; an owner without one loses its shards (--node-lease)",
		History:     1,
		TTL:         sc.NodeLease,
		Replicas:    max(n.cfg.Writer.Replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create or open the node leases bucket %s: %w", nodeLeasesBucket, err)
	}
	if _, err := kv.Put(ctx, leaseKey(sc.NodeID), []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return nil, fmt.Errorf("cannot put the lease of node %s in %s: %w", sc.NodeID, nodeLeasesBucket, err)
	}
	return kv, nil
}

// keepLease renews this node's lease and takes over the shards of owners
// without one, every --node-lease/3, until ctx ends.
func (n *node) keepLease(ctx context.Context, leases, owners jetstream.KeyValue, log *slog.Logger) {
	sc := n.cfg.Shard
	tick := time.NewTicker(sc.NodeLease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, sc.NodeLease/3)
		if _, err := leases.Put(rctx, leaseKey(sc.NodeID), []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
			log.Warn("cannot renew this node's lease", "err", err)
		}
		for s := range sc.Shards {
			if err := n.takeOverIfOrphaned(rctx, leases, owners, s, log); err != nil && ctx.Err() == nil {
				log.Warn("cannot check the owner of a shard", "shard", s, "err", err)
			}
		}
		cancel()
	}
}

// takeOverIfOrphaned makes this node the owner of shard s when the
// shard's owner in the bucket has no lease.
func (n *node) takeOverIfOrphaned(ctx context.Context, leases, owners jetstream.KeyValue, s int, log *slog.Logger) error {
	me := n.cfg.Shard.NodeID
	e, err := owners.Get(ctx, queryrpc.OwnerKey(s))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// Not orphaned but not claimed yet: a node starting later with
		// --own-shards claims it (taking it here would race every
		// deployment's start-up).
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the owner of shard %d: %w", s, err)
	}
	v, err := queryrpc.ParseOwnerValue(e.Value())
	if err != nil {
		return err
	}
	if v.Owner == me {
		return nil
	}
	_, err = leases.Get(ctx, leaseKey(v.Owner))
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("cannot read the lease of node %s: %w", v.Owner, err)
	}
	err = queryrpc.ForceOwner(ctx, owners, s, v, me)
	if errors.Is(err, queryrpc.ErrOwnerChanged) {
		return nil // another node took it, or its owner came back
	}
	if err != nil {
		return fmt.Errorf("cannot take over shard %d from %s: %w", s, v, err)
	}
	log.Warn("took over a shard whose owner's lease expired", "shard", s, "from", v.String())
	return nil
}
