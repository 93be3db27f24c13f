package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/sstable"
	"github.com/eventide/eventide/storage/vfs"
)

// Snapshots and exports.
//
// A Snapshot pins a version of the store whose memtables are all flushed:
// its SSTables hold every batch applied before DB.Snapshot was called,
// and none applied after the flush that made it (a batch goes whole into
// one memtable, and a memtable whole into the SSTables of one flush), so
// what a snapshot exports is a prefix of the store's batches. A caller
// that knows which writer wrote what can therefore export data and a
// position (a stream checkpoint) that agree: stop the writer, read its
// position, take the snapshot, start the writer again; the export can
// then run while writes continue.
//
// ExportTable writes the snapshot's cells of one table that a filter
// keeps, merged (versions reconciled, counter deltas summed, shadowed
// cells dropped, no tombstone purged), to new SSTable files outside the
// store, which DB.Ingest of another store takes in. A TimeWindow table is
// split into one file per window, so the importing store files each one
// in its window as if it had compacted it.

// Snapshot is a consistent, read-only view of a store's SSTables. Close
// it to release the files it holds. A snapshot dropped without Close is
// released when the garbage collector finds it unreachable, with a
// warning in the log and Metrics.UnclosedSnapshots counting it: until
// then its SSTables could not be deleted.
type Snapshot struct {
	db      *DB
	v       *version
	cleanup runtime.Cleanup
}

// Snapshot flushes the memtables and returns a view of the SSTables that
// holds every batch applied before the call.
func (db *DB) Snapshot() (*Snapshot, error) {
	// A memtable rotated by writes between the flush and the acquire
	// would leave frozen data outside the SSTables: flush again.
	for {
		if err := db.Flush(); err != nil {
			return nil, fmt.Errorf("cannot flush for a snapshot: %w", err)
		}
		db.mu.Lock()
		if db.closed {
			db.mu.Unlock()
			return nil, ErrClosed
		}
		v := db.current
		if len(v.imms) == 0 {
			v.ref()
			db.mu.Unlock()
			s := &Snapshot{db: db, v: v}
			s.cleanup = runtime.AddCleanup(s, releaseUnclosedSnapshot, unclosedSnapshot{db: db, v: v})
			return s, nil
		}
		db.mu.Unlock()
	}
}

// Close releases the snapshot's SSTables.
func (s *Snapshot) Close() {
	if s.v != nil {
		s.cleanup.Stop()
		s.v.unref()
		s.v = nil
	}
}

// unclosedSnapshot is what releaseUnclosedSnapshot needs of a Snapshot
// (not the Snapshot itself: a cleanup must not keep it reachable).
type unclosedSnapshot struct {
	db *DB
	v  *version
}

// releaseUnclosedSnapshot releases the version of a Snapshot that became
// unreachable without Close (a caller's bug). It runs once, on the
// runtime's cleanup goroutine, and never for a closed snapshot (Close
// stops it).
func releaseUnclosedSnapshot(u unclosedSnapshot) {
	u.v.unref()
	u.db.metrics.unclosedSnapshots.Add(1)
	u.db.log.Warn("a snapshot was never closed; the garbage collector released it (call Close on every Snapshot)")
}

// ExportedSSTable is one file ExportTable wrote.
type ExportedSSTable struct {
	Table      string
	Name       string // file name in the export directory
	Size       int64
	Partitions int64
	Cells      int64
}

// ExportTable writes the cells of table that keep keeps to new SSTables
// in dir (which must exist), named "<table>-<n>.sst" from n = first on,
// synced, and returns them; no file when nothing is kept. keep is asked
// with a partition and a clustering key for each cell, and with a nil
// clustering for the partition's deletions (partition and range
// tombstones). The files are written under a temporary name and renamed;
// dir itself is synced before ExportTable returns. When ctx is done the
// export stops, removes what it wrote and returns ctx's error.
func (s *Snapshot) ExportTable(ctx context.Context, dir, table string, first int, keep func(partition, clustering []byte) bool) ([]ExportedSSTable, error) {
	db := s.db
	if s.v == nil {
		return nil, errors.New("BUG: export from a closed snapshot")
	}
	db.mu.Lock()
	t, err := db.lookupTableLocked(table)
	db.mu.Unlock()
	if err != nil {
		return nil, err
	}
	inputs := s.v.sstables[t.id]
	sink := &exportSink{db: db, t: t, dir: dir, next: first, outputs: map[int64]*exportOutput{}}
	err = mergeForExport(ctx, inputs, sink, keep)
	outs, ferr := sink.finish(err == nil)
	if err == nil {
		err = ferr
	}
	if err == nil && len(outs) > 0 {
		err = db.opts.FS.SyncDir(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot export table %q to %s: %w", table, dir, err)
	}
	return outs, nil
}

// mergeForExport writes the merge of inputs to sink partition by
// partition, as a compaction that purges nothing, keeping only what keep
// keeps.
func mergeForExport(ctx context.Context, inputs []*sstHandle, sink *exportSink, keep func(partition, clustering []byte) bool) error {
	scanners := make([]*sstable.Scanner, len(inputs))
	live := make([]bool, len(inputs))
	defer closeScanners(scanners)
	for i, h := range inputs {
		scanners[i] = h.reader.NewScanner()
		live[i] = scanners[i].NextPartition()
		if err := scanners[i].Err(); err != nil {
			return fmt.Errorf("sstable %s: %w", h.path, err)
		}
	}
	for {
		var pk []byte
		for i, sc := range scanners {
			if live[i] && (pk == nil || bytes.Compare(sc.Partition().Key, pk) < 0) {
				pk = sc.Partition().Key
			}
		}
		if pk == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		pk = bytes.Clone(pk)
		del := base.PartitionDeletions{Partition: base.LiveDeletion}
		var sources []cellSource
		var members []int
		for i, sc := range scanners {
			if live[i] && bytes.Equal(sc.Partition().Key, pk) {
				info := sc.Partition()
				del.Partition = del.Partition.Max(info.Deletions.Partition)
				del.Ranges = append(del.Ranges, info.Deletions.Ranges...)
				sources = append(sources, scannerSource{s: sc})
				members = append(members, i)
			}
		}
		if len(members) > 1 {
			del.Ranges = base.FragmentRanges(del.Ranges)
		}
		shadowing := base.NewRangeCursor(del.Ranges, false)
		sink.startPartition(pk)
		if !del.IsEmpty() && keep(pk, nil) {
			kept := base.PartitionDeletions{Partition: del.Partition}
			for _, rt := range del.Ranges {
				if !del.Partition.Deletes(rt.Deletion.MarkedForDeleteAt) {
					kept.Ranges = append(kept.Ranges, rt.Clone())
				}
			}
			if err := sink.deletions(kept); err != nil {
				return err
			}
		}
		merge := newMergingIter(sources, nil, false)
		for merge.Next() {
			cell := merge.Cell()
			if del.Partition.Max(shadowing.Deletion(cell.Clustering)).Deletes(cell.Timestamp) {
				continue
			}
			if !keep(pk, cell.Clustering) {
				continue
			}
			if err := sink.add(cell); err != nil {
				return err
			}
		}
		if err := merge.Err(); err != nil {
			return err
		}
		for _, i := range members {
			live[i] = scanners[i].NextPartition()
			if err := scanners[i].Err(); err != nil {
				return fmt.Errorf("sstable %s: %w", inputs[i].path, err)
			}
		}
	}
}

// exportSink writes an export's cells to files in dir: one for a
// size-tiered table, one per time window (of each cell's timestamp, and
// of each deletion's) for a TimeWindow table. A partition is started in
// an output only when something of it goes there.
type exportSink struct {
	db      *DB
	t       *tableState
	dir     string
	next    int
	outputs map[int64]*exportOutput
	pk      []byte
	err     error
}

type exportOutput struct {
	name    string
	path    string
	f       vfs.File
	w       *sstable.Writer
	started bool // holds the current partition
	cells   int64
	parts   int64
}

func (s *exportSink) window(ts int64) int64 {
	if s.t.def.Compaction != TimeWindow {
		return 0
	}
	return timeWindow(ts, s.t.def.WindowSeconds)
}

func (s *exportSink) output(ts int64) (*exportOutput, error) {
	w := s.window(ts)
	if o := s.outputs[w]; o != nil {
		return o, nil
	}
	name := fmt.Sprintf("%s-%06d%s", s.t.def.Name, s.next, sstableSuffix)
	s.next++
	path := filepath.Join(s.dir, name)
	f, err := s.db.opts.FS.Create(path + tmpSuffix)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", path+tmpSuffix, err)
	}
	wopts := longLived.writerOptions(s.t.codec)
	wopts.BlockSize = s.db.opts.BlockSize
	wopts.CreatedAtSeconds = s.db.opts.Clock.Now().Unix()
	o := &exportOutput{name: name, path: path, f: f,
		w: sstable.NewWriter(&syncEvery{File: f, every: sstableBytesPerSync}, wopts)}
	s.outputs[w] = o
	return o, nil
}

func (s *exportSink) startPartition(pk []byte) {
	s.pk = pk
	for _, o := range s.outputs {
		o.started = false
	}
}

func (o *exportOutput) start(pk []byte, del base.PartitionDeletions) error {
	if o.started {
		return nil
	}
	o.started = true
	o.parts++
	return o.w.StartPartition(pk, del)
}

// deletions writes the partition's deletions, each to the output of its
// timestamp's window, before any of its cells.
func (s *exportSink) deletions(del base.PartitionDeletions) error {
	per, err := splitDeletionsByWindow(del, s.output)
	if err != nil {
		return err
	}
	for o, d := range per {
		if err := o.start(s.pk, *d); err != nil {
			return err
		}
	}
	return nil
}

func (s *exportSink) add(c *base.Cell) error {
	o, err := s.output(c.Timestamp)
	if err != nil {
		return err
	}
	if err := o.start(s.pk, base.PartitionDeletions{Partition: base.LiveDeletion}); err != nil {
		return err
	}
	o.cells++
	return o.w.Add(c)
}

// finish completes every output when ok, else removes them all.
func (s *exportSink) finish(ok bool) ([]ExportedSSTable, error) {
	windows := make([]int64, 0, len(s.outputs))
	for w := range s.outputs {
		windows = append(windows, w)
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i] < windows[j] })
	fsys := s.db.opts.FS
	var outs []ExportedSSTable
	var err error
	for _, w := range windows {
		o := s.outputs[w]
		if !ok || err != nil {
			o.f.Close()
			fsys.Remove(o.path + tmpSuffix)
			continue
		}
		props, ferr := o.w.Finish()
		if ferr == nil {
			ferr = o.f.Sync()
		}
		if cerr := o.f.Close(); ferr == nil {
			ferr = cerr
		}
		if ferr == nil {
			ferr = fsys.Rename(o.path+tmpSuffix, o.path)
		}
		if ferr != nil {
			fsys.Remove(o.path + tmpSuffix)
			err = fmt.Errorf("cannot write %s: %w", o.path, ferr)
			continue
		}
		st, serr := fsys.Stat(o.path)
		if serr != nil {
			err = serr
			continue
		}
		outs = append(outs, ExportedSSTable{Table: s.t.def.Name, Name: o.name, Size: st.Size(), Partitions: props.Partitions, Cells: o.cells})
	}
	if err != nil {
		for _, o := range outs {
			fsys.Remove(filepath.Join(s.dir, o.Name))
		}
		return nil, err
	}
	return outs, nil
}
