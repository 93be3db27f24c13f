package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/queryrpc"
)

// registerOwnersFlag registers --owners-kv.
func registerOwnersFlag(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.OwnersKV, "owners-kv", "",
		"NATS KV `bucket` of shard owners (the storage nodes' --owners-kv, e.g. "+queryrpc.DefaultOwnersBucket+"), watched: each shard is routed to its owner "+
			"there (to the old owner until it releases a moving shard); --owners is the map until the bucket names every shard")
}

// watchOwners follows the shard owners bucket, when --owners-kv names
// one: it waits for the bucket's current state, routes by it once it
// names an owner for every shard, and keeps the routing current until
// stop is called.
func (s *server) watchOwners(ctx context.Context) (stop func(), err error) {
	bucket := s.cfg.OwnersKV
	if bucket == "" {
		return func() {}, nil
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, fmt.Errorf("cannot use JetStream: %w", err)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("cannot open the shard owners bucket %s (--owners-kv): %w", bucket, err)
	}
	log := s.logger.With("component", "ownership", "bucket", bucket)
	owners := s.client.Owners() // --owners until the bucket says otherwise
	known := make([]bool, len(owners))
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done, ready := make(chan struct{}), make(chan struct{})
	initial := true
	apply := func() {
		if slices.Contains(known, false) {
			return // a shard without an owner in the bucket keeps --owners' routing
		}
		if err := s.client.SetOwners(owners); err != nil {
			log.Error("cannot route by the owners bucket", "err", err)
			return
		}
		log.Info("shard owners", "owners", owners)
	}
	go func() {
		defer close(done)
		err := queryrpc.WatchOwners(wctx, kv, len(owners), func(u queryrpc.OwnerUpdate) {
			switch {
			case u.Shard < 0:
				initial = false
				apply()
				close(ready)
				return
			case u.Deleted:
				known[u.Shard] = false
			default:
				// A moving shard stays with its owner until it releases
				// it: the new owner has not started yet.
				owners[u.Shard], known[u.Shard] = u.Value.Owner, true
			}
			if !initial {
				apply()
			}
		}, func(err error) { log.Warn("ignoring an entry of the owners bucket", "err", err) })
		if err != nil && wctx.Err() == nil {
			s.fail(err)
		}
	}()
	stop = func() { cancel(); <-done }
	select {
	case <-ready:
		return stop, nil
	case <-done:
		return nil, errors.New("the watch of the shard owners bucket stopped before it read the owners")
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}
