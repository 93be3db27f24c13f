package main

import (
	"bytes"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// badgerEngine stores each event as Pebble does (key partition + 0x00 +
// the order-preserving TimeUUID, value = the JSON), with zstd and one
// synced transaction per batch. Badger's defaults already are a 64 MiB
// memtable and a 256 MiB block cache (the equal-memory setting).
//
// Badger cannot flush its memtable on demand: flush does nothing, and the
// manual compaction (Flatten) compacts only what reached its levels.
// autoCompact=false runs it with no compactors.
type badgerEngine struct {
	dir string
	db  *badger.DB
}

func openBadger(dir string, autoCompact bool, mem memoryConfig) (engine, error) {
	o := badger.DefaultOptions(dir).WithLogger(nil).WithSyncWrites(true).WithCompression(options.ZSTD)
	if mem.memtableBytes > 0 {
		// Badger refuses a value threshold above its largest batch (a
		// share of the memtable); the events' ~200-byte values stay in
		// the LSM either way.
		o = o.WithMemTableSize(mem.memtableBytes).WithValueThreshold(min(o.ValueThreshold, mem.memtableBytes/10))
	}
	if mem.badgerCacheBytes > 0 {
		o = o.WithBlockCacheSize(mem.badgerCacheBytes)
	}
	if !autoCompact {
		o = o.WithNumCompactors(0)
	}
	db, err := badger.Open(o)
	if err != nil {
		return nil, err
	}
	return &badgerEngine{dir: dir, db: db}, nil
}

func (b *badgerEngine) name() string { return "badger" }

func (b *badgerEngine) ingest(evs []event, _ []int32) error {
	return b.db.Update(func(txn *badger.Txn) error {
		for i := range evs {
			if err := txn.Set(pebbleKey(evs[i].partition, evs[i].id), evs[i].value); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *badgerEngine) deleteEvents(evs []event) error {
	return b.db.Update(func(txn *badger.Txn) error {
		for i := range evs {
			if err := txn.Delete(pebbleKey(evs[i].partition, evs[i].id)); err != nil {
				return err
			}
		}
		return nil
	})
}

// expire point-deletes the events the expiry phase's TTLs would expire
// (Badger has TTLs, but per entry at write time, in wall-clock seconds:
// the harness's clock is not Badger's).
func (b *badgerEngine) expire(evs []event) error { return b.deleteEvents(evs) }

// deleteRows is deleteEvents: an event is one key.
func (b *badgerEngine) deleteRows(evs []event) error { return b.deleteEvents(evs) }

func (b *badgerEngine) flush() error { return nil }

func (b *badgerEngine) flushAndCompact() error { return b.db.Flatten(2) }

func (b *badgerEngine) latest(partition string, n int) (int, error) {
	lo, hi := partitionBounds(partition)
	count := 0
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: lo})
		defer it.Close()
		for it.Seek(hi); it.Valid() && count < n; it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			_ = bytes.Clone(v)
			count++
		}
		return nil
	})
	return count, err
}

func (b *badgerEngine) all(partition string) (int, error) {
	lo, _ := partitionBounds(partition)
	count := 0
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: lo, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(func([]byte) error { return nil }); err != nil {
				return err
			}
			count++
		}
		return nil
	})
	return count, err
}

func (b *badgerEngine) window(partition string, lo, hi []byte) (int, error) {
	prefix, _ := partitionBounds(partition)
	start, end := append(bytes.Clone(prefix), lo...), append(bytes.Clone(prefix), hi...)
	count := 0
	err := b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Seek(start); it.Valid() && bytes.Compare(it.Item().Key(), end) < 0; it.Next() {
			if err := it.Item().Value(func([]byte) error { return nil }); err != nil {
				return err
			}
			count++
		}
		return nil
	})
	return count, err
}

// compactedBytes is the LSM's size: it moves while compactions run.
func (b *badgerEngine) compactedBytes() (int64, error) {
	lsm, _ := b.db.Size()
	return lsm, nil
}

func (b *badgerEngine) diskBytes() (int64, error) { return dirSize(b.dir) }

func (b *badgerEngine) close() error { return b.db.Close() }
