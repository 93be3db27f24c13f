package queryrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Shard ownership in a NATS KV bucket.
//
// The bucket (DefaultOwnersBucket) holds one key per shard, "shard.<n>",
// whose value is the owner's node id, or "<from>><to>" while the shard
// moves from node <from> to node <to>. Every change is a compare-and-swap
// on the key's revision (KV Create or Update with the last revision), so
// two changes can never both apply to the same state. A move is two such
// steps, which is the fencing:
//
//  1. anyone (an operator, a tool: MoveShard) swaps "<from>" for
//     "<from>><to>";
//  2. <from>, watching the bucket, stops its writer of the shard (it
//     finishes and acks its in-flight batch, then applies nothing more)
//     and only then swaps "<from>><to>" for "<to>" (ReleaseShard);
//  3. <to>, watching the bucket, starts its writer of the shard when the
//     value is exactly its id, replaying the shard from the stream from
//     its own checkpoint.
//
// So the new owner never starts before the old one has stopped. When the
// old owner is dead it cannot release; an operator who knows it is dead
// swaps the value to "<to>" directly (ForceOwner). A node that comes back
// and finds another owner starts nothing. Readers (cmd/query) route a
// shard to <from> until the release, then to <to>.

// DefaultOwnersBucket is the KV bucket of shard owners.
const DefaultOwnersBucket = "eventide-shard-owners"

// ErrOwnerChanged is returned by MoveShard, ReleaseShard and ForceOwner
// when the shard's owner is not what the caller expected: another change
// came first.
var ErrOwnerChanged = errors.New("the shard's owner changed")

// OwnerKey is the key of shard s.
func OwnerKey(s int) string { return "shard." + strconv.Itoa(s) }

// ParseOwnerKey returns the shard of a key, or an error.
func ParseOwnerKey(key string, shards int) (int, error) {
	n, ok := strings.CutPrefix(key, "shard.")
	s, err := strconv.Atoi(n)
	if !ok || err != nil || s < 0 || s >= shards || strconv.Itoa(s) != n {
		return 0, fmt.Errorf("owner key %q is not shard.<n> with n below %d", key, shards)
	}
	return s, nil
}

// OwnerValue is a shard's state in the bucket.
type OwnerValue struct {
	Owner    string // the node that owns (and still applies) the shard
	MovingTo string // the node it moves to, once Owner releases it; "" when not moving
}

func (v OwnerValue) String() string {
	if v.MovingTo == "" {
		return v.Owner
	}
	return v.Owner + ">" + v.MovingTo
}

// ParseOwnerValue parses "<node>" or "<from>><to>".
func ParseOwnerValue(b []byte) (OwnerValue, error) {
	from, to, moving := strings.Cut(string(b), ">")
	v := OwnerValue{Owner: from, MovingTo: to}
	if err := checkToken("node", from); err != nil {
		return OwnerValue{}, fmt.Errorf("owner value %q: %w", b, err)
	}
	if moving {
		if err := checkToken("node", to); err != nil {
			return OwnerValue{}, fmt.Errorf("owner value %q: %w", b, err)
		}
		if to == from {
			return OwnerValue{}, fmt.Errorf("owner value %q moves a shard to its own owner", b)
		}
	}
	return v, nil
}

// OwnersBucket creates (or opens) the owners bucket with replicas copies.
func OwnersBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	if bucket == "" {
		bucket = DefaultOwnersBucket
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "eventide: owner node of each shard (shard.<n> -> node, or from>to while moving)",
		History:     8,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create or open the shard owners bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// ClaimShard makes node the owner of shard s if the shard has none. It
// reports whether node owns it now (it may have before).
func ClaimShard(ctx context.Context, kv jetstream.KeyValue, s int, node string) (bool, error) {
	_, err := kv.Create(ctx, OwnerKey(s), []byte(node))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, fmt.Errorf("cannot claim shard %d: %w", s, err)
	}
	e, err := kv.Get(ctx, OwnerKey(s))
	if err != nil {
		return false, fmt.Errorf("cannot read the owner of shard %d: %w", s, err)
	}
	v, err := ParseOwnerValue(e.Value())
	if err != nil {
		return false, err
	}
	return v.Owner == node && v.MovingTo == "", nil
}

// swap replaces the value of shard s, if it is want, with next: a
// compare-and-swap on the revision read.
func swap(ctx context.Context, kv jetstream.KeyValue, s int, want OwnerValue, next OwnerValue) (uint64, error) {
	e, err := kv.Get(ctx, OwnerKey(s))
	if err != nil {
		return 0, fmt.Errorf("cannot read the owner of shard %d: %w", s, err)
	}
	cur, err := ParseOwnerValue(e.Value())
	if err != nil {
		return 0, err
	}
	if cur != want {
		return 0, fmt.Errorf("%w: shard %d is %q, not %q", ErrOwnerChanged, s, cur, want)
	}
	rev, err := kv.Update(ctx, OwnerKey(s), []byte(next.String()), e.Revision())
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, fmt.Errorf("%w: shard %d changed since revision %d", ErrOwnerChanged, s, e.Revision())
		}
		return 0, fmt.Errorf("cannot change the owner of shard %d: %w", s, err)
	}
	return rev, nil
}

// MoveShard asks the owner from of shard s to hand it to node to: the
// first step of a move. from releases it once it has stopped applying it.
func MoveShard(ctx context.Context, kv jetstream.KeyValue, s int, from, to string) error {
	if err := checkToken("node", to); err != nil {
		return err
	}
	_, err := swap(ctx, kv, s, OwnerValue{Owner: from}, OwnerValue{Owner: from, MovingTo: to})
	return err
}

// ReleaseShard completes a move of shard s away from node from, which has
// stopped applying it.
func ReleaseShard(ctx context.Context, kv jetstream.KeyValue, s int, from, to string) error {
	_, err := swap(ctx, kv, s, OwnerValue{Owner: from, MovingTo: to}, OwnerValue{Owner: to})
	return err
}

// ForceOwner gives shard s to node to without its owner's release: only
// for an owner known to be dead (a live one would go on applying the
// shard to its own store, which no query reads any more).
func ForceOwner(ctx context.Context, kv jetstream.KeyValue, s int, want OwnerValue, to string) error {
	_, err := swap(ctx, kv, s, want, OwnerValue{Owner: to})
	return err
}

// OwnerUpdate is one change seen by WatchOwners: shard Shard is now
// Value, or has no owner when Deleted. Initial is true for the entries
// that were in the bucket when the watch began.
type OwnerUpdate struct {
	Shard   int
	Value   OwnerValue
	Deleted bool
	Initial bool
}

// WatchOwners calls fn with every shard's owner in the bucket, then with
// every change, in order, until ctx ends (it then returns nil) or the
// watch fails. After the initial entries it calls fn once with Shard -1
// (the current state is complete). Keys or values that do not parse are
// skipped and reported to bad.
func WatchOwners(ctx context.Context, kv jetstream.KeyValue, shards int, fn func(OwnerUpdate), bad func(error)) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("cannot watch the shard owners bucket: %w", err)
	}
	defer w.Stop()
	initial := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the watch of the shard owners bucket ended")
			}
			if e == nil {
				initial = false
				fn(OwnerUpdate{Shard: -1})
				continue
			}
			s, err := ParseOwnerKey(e.Key(), shards)
			if err != nil {
				bad(err)
				continue
			}
			u := OwnerUpdate{Shard: s, Initial: initial}
			if e.Operation() != jetstream.KeyValuePut {
				u.Deleted = true
			} else if u.Value, err = ParseOwnerValue(e.Value()); err != nil {
				bad(err)
				continue
			}
			fn(u)
		}
	}
}
