package main

import (
	"bytes"
	"fmt"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// goleveldbEngine stores each event as Pebble does (key partition + 0x00
// + the order-preserving TimeUUID, value = the JSON), with goleveldb's only
// block codec, snappy, and one synced write per batch.
//
// goleveldb cannot turn its compactions off nor flush its memtable on
// demand: autoCompact=false is ignored (its expiry-phase figures had
// compactions running) and flush does nothing (its deletes are read from
// the memtable until it fills).
type goleveldbEngine struct {
	dir string
	db  *leveldb.DB
}

func openGoleveldb(dir string, mem memoryConfig) (engine, error) {
	o := &opt.Options{Compression: opt.SnappyCompression}
	if mem.memtableBytes > 0 {
		o.WriteBuffer = int(mem.memtableBytes)
	}
	if mem.goleveldbCacheBytes > 0 {
		o.BlockCacheCapacity = int(mem.goleveldbCacheBytes)
	}
	db, err := leveldb.OpenFile(dir, o)
	if err != nil {
		return nil, err
	}
	return &goleveldbEngine{dir: dir, db: db}, nil
}

func (g *goleveldbEngine) name() string { return "goleveldb" }

var syncWrite = &opt.WriteOptions{Sync: true}

func (g *goleveldbEngine) ingest(evs []event, _ []int32) error {
	var b leveldb.Batch
	for i := range evs {
		b.Put(pebbleKey(evs[i].partition, evs[i].id), evs[i].value)
	}
	return g.db.Write(&b, syncWrite)
}

func (g *goleveldbEngine) deleteEvents(evs []event) error {
	var b leveldb.Batch
	for i := range evs {
		b.Delete(pebbleKey(evs[i].partition, evs[i].id))
	}
	return g.db.Write(&b, syncWrite)
}

// expire point-deletes the events the expiry phase's TTLs would expire:
// goleveldb has no TTL.
func (g *goleveldbEngine) expire(evs []event) error { return g.deleteEvents(evs) }

// deleteRows is deleteEvents: an event is one key, so a row delete and a
// cell delete are the same operation.
func (g *goleveldbEngine) deleteRows(evs []event) error { return g.deleteEvents(evs) }

func (g *goleveldbEngine) flush() error { return nil }

func (g *goleveldbEngine) flushAndCompact() error { return g.db.CompactRange(util.Range{}) }

func (g *goleveldbEngine) latest(partition string, n int) (int, error) {
	lo, hi := partitionBounds(partition)
	it := g.db.NewIterator(&util.Range{Start: lo, Limit: hi}, nil)
	count := 0
	for ok := it.Last(); ok && count < n; ok = it.Prev() {
		_ = bytes.Clone(it.Value())
		count++
	}
	it.Release()
	return count, it.Error()
}

func (g *goleveldbEngine) all(partition string) (int, error) {
	lo, hi := partitionBounds(partition)
	it := g.db.NewIterator(&util.Range{Start: lo, Limit: hi}, nil)
	count := 0
	for it.Next() {
		_ = it.Value()
		count++
	}
	it.Release()
	return count, it.Error()
}

func (g *goleveldbEngine) window(partition string, lo, hi []byte) (int, error) {
	prefix, _ := partitionBounds(partition)
	it := g.db.NewIterator(&util.Range{Start: append(bytes.Clone(prefix), lo...), Limit: append(bytes.Clone(prefix), hi...)}, nil)
	count := 0
	for it.Next() {
		_ = it.Value()
		count++
	}
	it.Release()
	return count, it.Error()
}

// compactedBytes is the bytes goleveldb's compactions have written so far.
func (g *goleveldbEngine) compactedBytes() (int64, error) {
	var s leveldb.DBStats
	if err := g.db.Stats(&s); err != nil {
		return 0, fmt.Errorf("cannot read goleveldb stats: %w", err)
	}
	var total int64
	for _, w := range s.LevelWrite {
		total += w
	}
	return total, nil
}

func (g *goleveldbEngine) diskBytes() (int64, error) { return dirSize(g.dir) }

func (g *goleveldbEngine) close() error { return g.db.Close() }
