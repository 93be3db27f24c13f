package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/eventide/eventide/storage"
)

const eventsTable = "events"

var dataColumn = []byte("data")

type eventideEngine struct {
	dir   string
	db    *storage.DB
	batch storage.Batch
	last  storage.ReadStats
}

// openEventide opens an Eventide store with the events table.
// tombstoneIntervalSeconds, if not nil, is the table's
// TombstoneCompactionIntervalSeconds: the delete phase sets it to 0, since
// its last flush of deletions is new by the engine's clock and the default
// (a day) would keep background compaction from picking it within the
// phase's 60 s.
func openEventide(dir string, clock *benchClock, autoCompact bool, mem memoryConfig, strategy storage.CompactionStrategy, tombstoneIntervalSeconds *int64) (engine, error) {
	opts := storage.DefaultOptions()
	if mem.eventideCacheBytes > 0 {
		opts.BlockCacheSize = mem.eventideCacheBytes
	}
	if mem.memtableBytes > 0 {
		opts.MemtableSize = mem.memtableBytes
	}
	opts.BlockSize = mem.eventideBlockSize
	opts.SSTableDictionary = mem.eventideDictionary
	opts.Clock = clock
	if mem.eventideLog {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.DisableAutoCompaction = !autoCompact
	db, err := storage.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	if strategy == "" {
		strategy = storage.TimeWindow
	}
	def := storage.TableDef{Name: eventsTable, Compaction: strategy, WindowSeconds: 3600, TombstoneCompactionIntervalSeconds: tombstoneIntervalSeconds}
	if err := db.CreateTable(def); err != nil {
		db.Close()
		return nil, err
	}
	return &eventideEngine{dir: dir, db: db}, nil
}

func (e *eventideEngine) name() string { return "eventide" }

// clusteringDesc is the events table's clustering key: event_id timeuuid
// DESC, so storage order is newest first.
func clusteringDesc(id [16]byte) []byte {
	enc := encodeTimeUUID(id)
	for i := range enc {
		enc[i] = ^enc[i]
	}
	return enc
}

func (e *eventideEngine) ingest(evs []event, ttls []int32) error {
	e.batch.Reset()
	for i := range evs {
		ev := &evs[i]
		ts := ev.time.UnixMicro()
		if ttls != nil {
			e.batch.PutTTL(eventsTable, []byte(ev.partition), clusteringDesc(ev.id), dataColumn, ev.value, ts, ttls[i])
		} else {
			e.batch.Put(eventsTable, []byte(ev.partition), clusteringDesc(ev.id), dataColumn, ev.value, ts)
		}
	}
	return e.db.Apply(context.Background(), &e.batch)
}

// expire does nothing: the expiry phase's TTLs expire the events.
func (e *eventideEngine) expire([]event) error { return nil }

// deleteEvents writes a cell tombstone for each event's data column at
// the engine's "now".
func (e *eventideEngine) deleteEvents(evs []event) error {
	e.batch.Reset()
	now := e.db.NowMicros()
	for i := range evs {
		e.batch.DeleteCell(eventsTable, []byte(evs[i].partition), clusteringDesc(evs[i].id), dataColumn, now)
	}
	return e.db.Apply(context.Background(), &e.batch)
}

// deleteRows deletes each event's row (DeleteRow) at the engine's "now".
func (e *eventideEngine) deleteRows(evs []event) error {
	e.batch.Reset()
	now := e.db.NowMicros()
	for i := range evs {
		e.batch.DeleteRow(eventsTable, []byte(evs[i].partition), clusteringDesc(evs[i].id), now)
	}
	return e.db.Apply(context.Background(), &e.batch)
}

// compactedBytes is the bytes Eventide's compactions have written so far.
func (e *eventideEngine) compactedBytes() (int64, error) {
	m := e.db.Metrics()
	busy := int64(0)
	for _, t := range m.Tables {
		busy += int64(t.Compacting)
	}
	return m.CompactionWritten + busy, nil
}

func (e *eventideEngine) flush() error { return e.db.Flush() }

func (e *eventideEngine) flushAndCompact() error {
	if err := e.db.Flush(); err != nil {
		return err
	}
	return e.db.CompactAll()
}

func (e *eventideEngine) latest(partition string, n int) (int, error) {
	return e.slice(storage.SliceQuery{Table: eventsTable, Partition: []byte(partition), Limit: n})
}

func (e *eventideEngine) all(partition string) (int, error) {
	return e.slice(storage.SliceQuery{Table: eventsTable, Partition: []byte(partition)})
}

// window reads the events in [lo, hi): clustering keys are the encodings
// inverted (DESC), all 16 bytes, so the range is (^hi, ^lo].
func (e *eventideEngine) window(partition string, lo, hi []byte) (int, error) {
	return e.slice(storage.SliceQuery{Table: eventsTable, Partition: []byte(partition),
		Start: storage.Bound{Key: invert(hi)}, End: storage.Bound{Key: invert(lo), Inclusive: true}})
}

func invert(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[i] = ^b[i]
	}
	return out
}

func (e *eventideEngine) slice(q storage.SliceQuery) (int, error) {
	it, err := e.db.Slice(context.Background(), q)
	if err != nil {
		return 0, err
	}
	n := 0
	for it.Next() {
		n += len(it.Row().Cells)
	}
	err = it.Close()
	e.last = it.Stats()
	return n, err
}

// metricsString is the engine's metrics table (for -ingestprofile).
func (e *eventideEngine) metricsString() string { return e.db.Metrics().String() }

func (e *eventideEngine) lastTrace() string { return e.last.String() }

// lsmState is the store's SSTables by time window and its counters, for
// -slowest's report before the delete phase's background-only reads.
func (e *eventideEngine) lsmState() string {
	m := e.db.Metrics()
	var b strings.Builder
	b.WriteString(m.String())
	for _, t := range m.Tables {
		for _, w := range t.Windows {
			fmt.Fprintf(&b, "  window %s: %d sstables, %d bytes\n", w.Start.Format("01-02T15"), w.SSTables, w.Bytes)
		}
	}
	return b.String()
}

func (e *eventideEngine) diskBytes() (int64, error) { return dirSize(e.dir) }

func (e *eventideEngine) close() error { return e.db.Close() }

// dirSize is the bytes the files under dir take: each file's size, or
// what the filesystem allocated to it when that is less. Eventide's WAL
// segments are preallocated sparse files (64 MiB apparent, only the
// written part allocated), and counting their apparent size made a
// 300,000-event store look 7x larger than it is.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			// Removed since the directory was listed: an obsolete file a
			// background compaction just deleted, which no longer counts.
			return nil
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			size := info.Size()
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < size {
				size = st.Blocks * 512
			}
			total += size
		}
		return nil
	})
	return total, err
}
