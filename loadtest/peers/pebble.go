package main

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// pebbleEngine stores each event at key partition + 0x00 + the
// order-preserving TimeUUID (ascending), value = the JSON, with zstd and
// one synced commit per batch.
type pebbleEngine struct {
	dir  string
	db   *pebble.DB
	last pebble.IteratorStats
}

func openPebble(dir string, autoCompact bool, mem memoryConfig) (engine, error) {
	opts := &pebble.Options{DisableAutomaticCompactions: !autoCompact, Logger: quietLogger{}, CacheSize: mem.pebbleCacheBytes}
	if mem.memtableBytes > 0 {
		opts.MemTableSize = uint64(mem.memtableBytes)
	}
	opts.EnsureDefaults()
	opts.ApplyCompressionSettings(func() pebble.DBCompressionSettings {
		return pebble.UniformDBCompressionSettings(sstable.ZstdCompression)
	})
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	return &pebbleEngine{dir: dir, db: db}, nil
}

func (p *pebbleEngine) name() string { return "pebble" }

func pebbleKey(partition string, id [16]byte) []byte {
	k := make([]byte, 0, len(partition)+1+16)
	k = append(k, partition...)
	k = append(k, 0)
	return append(k, encodeTimeUUID(id)...)
}

func (p *pebbleEngine) ingest(evs []event, _ []int32) error {
	b := p.db.NewBatch()
	for i := range evs {
		if err := b.Set(pebbleKey(evs[i].partition, evs[i].id), evs[i].value, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (p *pebbleEngine) deleteEvents(evs []event) error {
	b := p.db.NewBatch()
	for i := range evs {
		if err := b.Delete(pebbleKey(evs[i].partition, evs[i].id), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// expire point-deletes the events the expiry phase's TTLs would expire:
// Pebble has no TTL.
func (p *pebbleEngine) expire(evs []event) error { return p.deleteEvents(evs) }

// deleteRows is deleteEvents: an event is one key, so a row delete and a
// cell delete are the same operation.
func (p *pebbleEngine) deleteRows(evs []event) error { return p.deleteEvents(evs) }

func (p *pebbleEngine) flush() error { return p.db.Flush() }

// compactedBytes is the bytes Pebble's compactions have written so far.
func (p *pebbleEngine) compactedBytes() (int64, error) {
	m := p.db.Metrics()
	var total int64
	for i := range m.Levels {
		total += int64(m.Levels[i].TableBytesCompacted)
	}
	return total + m.Compact.NumInProgress, nil
}

func (p *pebbleEngine) flushAndCompact() error {
	if err := p.db.Flush(); err != nil {
		return err
	}
	return p.db.Compact(context.Background(), nil, []byte{0xff, 0xff, 0xff, 0xff}, true)
}

func partitionBounds(partition string) (lo, hi []byte) {
	lo = append([]byte(partition), 0)
	hi = append([]byte(partition), 1)
	return lo, hi
}

func (p *pebbleEngine) latest(partition string, n int) (int, error) {
	lo, hi := partitionBounds(partition)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	count := 0
	for ok := it.Last(); ok && count < n; ok = it.Prev() {
		_ = bytes.Clone(it.Value())
		count++
	}
	p.last = it.Stats()
	return count, it.Close()
}

func (p *pebbleEngine) all(partition string) (int, error) {
	lo, hi := partitionBounds(partition)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	count := 0
	for ok := it.First(); ok; ok = it.Next() {
		_ = it.Value()
		count++
	}
	p.last = it.Stats()
	return count, it.Close()
}

func (p *pebbleEngine) window(partition string, lo, hi []byte) (int, error) {
	prefix, _ := partitionBounds(partition)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: append(bytes.Clone(prefix), lo...), UpperBound: append(bytes.Clone(prefix), hi...)})
	if err != nil {
		return 0, err
	}
	count := 0
	for ok := it.First(); ok; ok = it.Next() {
		_ = it.Value()
		count++
	}
	p.last = it.Stats()
	return count, it.Close()
}

func (p *pebbleEngine) lastTrace() string {
	s := &p.last.InternalStats
	return fmt.Sprintf("block bytes %d (%d cached), block read %s, %d points",
		s.BlockBytes, s.BlockBytesInCache, s.BlockReadDuration, s.PointCount)
}

func (p *pebbleEngine) diskBytes() (int64, error) { return dirSize(p.dir) }

func (p *pebbleEngine) close() error { return p.db.Close() }

// quietLogger drops Pebble's informational log lines (they would bury the
// benchmark's progress output) and keeps errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
	os.Exit(1)
}
