package storage

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/internal/memtable"
	"github.com/eventide/eventide/storage/internal/sstable"
	"github.com/eventide/eventide/storage/vfs"
)

// flushLoop writes frozen memtables to SSTables, oldest first, one at a
// time, so the manifest's MinUnflushedWAL only moves forward.
func (db *DB) flushLoop() {
	defer db.bg.Done()
	attempt := 0 // flushes failed in a row for lack of space
	for {
		select {
		case <-db.closing:
			return
		case <-db.flushSignal:
		}
		for {
			db.mu.Lock()
			if db.closed || db.bgErr != nil || len(db.current.imms) == 0 {
				db.mu.Unlock()
				break
			}
			imm := db.current.imms[0]
			db.mu.Unlock()
			if err := db.flush(imm); err != nil {
				err = fmt.Errorf("flush: %w", err)
				if !isNoSpace(err) {
					db.setBackgroundError(err)
					break
				}
				db.setTransientError(&db.flushErr, err)
				select {
				case <-db.closing:
					return
				case <-time.After(retryBackoff(attempt)):
				}
				attempt++
				continue
			}
			attempt = 0
			db.clearTransientError(&db.flushErr)
		}
	}
}

// flush writes one SSTable per table of imm, then records them and the new
// MinUnflushedWAL in the manifest in one edit, and only then drops imm and
// the WAL segments it covered.
func (db *DB) flush(imm *immMemtable) error {
	start := time.Now()
	var added []*sstHandle
	var bytes int64
	for _, tableID := range imm.mem.Tables() {
		db.mu.Lock()
		t := db.tablesByID[tableID]
		db.mu.Unlock()
		h, err := db.writeSSTable(t, shortLived, nil, func(w *sstable.Writer) error { return writeMemtable(w, imm.mem, tableID) })
		if err != nil {
			for _, h := range added {
				h.discard()
			}
			return err
		}
		added = append(added, h)
		bytes += h.size
	}
	err := db.editManifest(func(m *manifestData, ssts map[uint32][]*sstHandle) {
		for _, h := range added {
			m.SSTables = append(m.SSTables, manifestSSTable{FileNum: h.fileNum, TableID: h.tableID, Size: h.size})
			ssts[h.tableID] = append(ssts[h.tableID], h)
		}
		m.MinUnflushedWAL = imm.walSegmentAfter
	}, func(v *version) *version {
		if len(v.imms) == 0 || v.imms[0] != imm {
			panic("BUG: flushed memtable is not the oldest frozen one")
		}
		// Counted before the new version is visible, so whoever waits
		// for the flush (DB.Flush) sees it in the metrics.
		db.metrics.flushed(len(added), bytes, time.Since(start))
		db.walReleasing++ // under mu: editManifest holds it here
		// A fresh slice: v.imms[1:] would keep the flushed memtable
		// reachable through the shared backing array.
		return &version{mem: v.mem, imms: append([]*immMemtable(nil), v.imms[1:]...)}
	})
	if err != nil {
		if !errors.Is(err, errManifestUnsynced) {
			// The manifest on disk does not name them: the retry
			// writes new ones.
			for _, h := range added {
				h.discard()
			}
		}
		return err
	}
	if db.afterFlushInstall != nil {
		db.afterFlushInstall()
	}
	if _, err := db.wal.ReleaseSegmentsBefore(imm.walSegmentAfter); err != nil {
		db.log.Warn("cannot delete flushed wal segments", "err", err)
	}
	db.mu.Lock()
	db.walReleasing--
	db.broadcastLocked()
	db.mu.Unlock()
	db.log.Debug("flushed memtable", "sstables", len(added), "bytes", bytes, "took", time.Since(start))
	db.maybeScheduleCompaction()
	return nil
}

// writeMemtable copies one table's partitions from a frozen memtable, in
// one pass over its cells, merged with the partitions that hold only
// deletions.
func writeMemtable(w *sstable.Writer, mem *memtable.Memtable, tableID uint32) error {
	deleted := mem.DeletionPartitions(tableID)
	it := mem.NewTableIter(tableID)
	haveCell := it.Next()
	for haveCell || len(deleted) > 0 {
		var pk []byte
		switch {
		case !haveCell:
			pk = deleted[0]
		case len(deleted) == 0 || bytes.Compare(it.Partition(), deleted[0]) < 0:
			pk = it.Partition()
		default:
			pk = deleted[0]
		}
		del := base.PartitionDeletions{Partition: base.LiveDeletion}
		if len(deleted) > 0 && bytes.Equal(deleted[0], pk) {
			deleted = deleted[1:]
			if d := mem.Deletions(tableID, pk); d != nil {
				del = *d
			}
		}
		if err := w.StartPartition(pk, del); err != nil {
			return err
		}
		for haveCell && bytes.Equal(it.Partition(), pk) {
			if err := w.Add(it.Cell()); err != nil {
				return err
			}
			haveCell = it.Next()
		}
	}
	return nil
}

// sstableLife is how long a new SSTable is expected to live, which decides
// how hard a zstd table's blocks are compressed (s2 and none tables always
// use their own codec).
//
// A flush sits on the write path's critical backlog, and a compaction
// inside a time window's active window writes a file that will be merged
// again (when the window closes, or the next size tier forms): both are
// short-lived and written with S2, several times cheaper than even zstd's
// fastest level. Every other compaction writes files that are kept and
// read for a long time, at zstd level 7. Measured: with zstd level 1
// flushes, zstd was the largest CPU cost of the storage benchmark's
// ingest, and S2 flushes raised ingest from 1.29x-1.50x to 1.64x-1.76x of
// Pebble's (loadtest/peers, same runs); level-7 intermediate compactions
// competed with the writer for the CPU and doubled its p99
// publish-to-queryable latency. The final size is unchanged, since every
// long-lived file is rewritten at level 7. (A window whose active-window
// compactions leave exactly one SSTable is not merged when it closes; the
// rewrite of compaction_rewrite.go turns that S2 file into zstd once the
// engine has nothing else to do, or rate-limited if it never has.)
type sstableLife int

const (
	shortLived sstableLife = iota
	longLived
)

// longLivedZstdLevel is the zstd level of long-lived SSTables: ~4% smaller
// than level 1 on the benchmark's events for ~2.5x the CPU.
const longLivedZstdLevel = 7

func (l sstableLife) writerOptions(codec sstable.Compression) sstable.WriterOptions {
	switch {
	case codec != sstable.CompressionZstd:
		return sstable.WriterOptions{Compression: codec}
	case l == shortLived:
		return sstable.WriterOptions{Compression: sstable.CompressionS2}
	default:
		return sstable.WriterOptions{Compression: codec, ZstdLevel: longLivedZstdLevel}
	}
}

// dictionaryBlockSize is the data block size with Options.SSTableDictionary
// (unless Options.BlockSize is set): against the file's dictionary a 16
// KiB block compresses nearly as well as a 32 KiB one without it.
const dictionaryBlockSize = 16 << 10

// sstableBytesPerSync is how much of a new SSTable may be written before
// it is synced. Without it a compaction left tens of MB of dirty pages for
// its final fsync, and a WAL fsync issued meanwhile (ext4 commits its
// journal for both) waited for that writeback: p99 publish-to-queryable
// latency showed spikes at every compaction. RocksDB's bytes_per_sync
// does the same.
const sstableBytesPerSync = 1 << 20

// syncEvery syncs a file each time every more bytes were written to it,
// and, with pace, lets pace hold each write back first (a background
// compaction's output, DB.paceCompaction).
type syncEvery struct {
	vfs.File
	every, unsynced int
	pace            func(n int)
}

func (s *syncEvery) Write(p []byte) (int, error) {
	if s.pace != nil {
		s.pace(len(p))
	}
	n, err := s.File.Write(p)
	s.unsynced += n
	if err == nil && s.unsynced >= s.every {
		s.unsynced = 0
		err = s.File.Sync()
	}
	return n, err
}

// writeSSTable writes a new SSTable for table t with fill, compressed for
// its expected life, syncs it and opens it. The file is written under a
// temporary name and renamed, so a crash never leaves a half-written file
// under a live-looking name. pace, when not nil, is called before each
// write to the file with its length (compaction_pacer.go).
func (db *DB) writeSSTable(t *tableState, life sstableLife, pace func(n int), fill func(*sstable.Writer) error) (*sstHandle, error) {
	p, err := db.createSSTable(t, life, pace)
	if err != nil {
		return nil, err
	}
	if err := fill(p.w); err != nil {
		p.abort(db)
		return nil, fmt.Errorf("cannot write sstable %s for table %q: %w", p.path, t.def.Name, err)
	}
	return p.finish(db)
}

// pendingSSTable is an SSTable being written under its temporary name.
type pendingSSTable struct {
	t       *tableState
	fileNum uint64
	path    string
	f       vfs.File
	w       *sstable.Writer
}

// createSSTable starts a new SSTable of table t: finish or abort it. pace
// is as writeSSTable's.
func (db *DB) createSSTable(t *tableState, life sstableLife, pace func(n int)) (*pendingSSTable, error) {
	db.mu.Lock()
	fileNum := db.manifest.NextFileNum
	db.manifest.NextFileNum++
	db.mu.Unlock()
	path := sstablePath(db.dir, fileNum)
	f, err := db.opts.FS.Create(path + tmpSuffix)
	if err != nil {
		return nil, fmt.Errorf("cannot create sstable %s: %w", path+tmpSuffix, err)
	}
	wopts := life.writerOptions(t.codec)
	wopts.BlockSize = db.opts.BlockSize
	wopts.NoDictionary = !db.opts.SSTableDictionary
	if wopts.BlockSize == 0 && db.opts.SSTableDictionary {
		wopts.BlockSize = dictionaryBlockSize
	}
	wopts.DictionarySampleSize = db.opts.dictionarySampleSize
	wopts.CreatedAtSeconds = db.opts.Clock.Now().Unix()
	w := sstable.NewWriter(&syncEvery{File: f, every: sstableBytesPerSync, pace: pace}, wopts)
	return &pendingSSTable{t: t, fileNum: fileNum, path: path, f: f, w: w}, nil
}

// finish completes the file, syncs it, renames it into place and opens it.
func (p *pendingSSTable) finish(db *DB) (*sstHandle, error) {
	_, err := p.w.Finish()
	if err == nil {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	tmp := p.path + tmpSuffix
	if err == nil {
		err = db.opts.FS.Rename(tmp, p.path)
	}
	if err == nil {
		err = db.opts.FS.SyncDir(filepath.Dir(p.path))
	}
	if err != nil {
		db.opts.FS.Remove(tmp)
		return nil, fmt.Errorf("cannot write sstable %s for table %q: %w", p.path, p.t.def.Name, err)
	}
	return db.openSSTable(p.fileNum, p.t.id)
}

// abort drops the unfinished file.
func (p *pendingSSTable) abort(db *DB) {
	p.f.Close()
	db.opts.FS.Remove(p.path + tmpSuffix)
}

// editManifest applies one change durably: edit changes a copy of the
// manifest and of the table -> SSTables map; then the manifest is
// written and a new version installed, built by next from the current one
// (next's result needs only mem and imms; the SSTables come from edit).
func (db *DB) editManifest(edit func(*manifestData, map[uint32][]*sstHandle), next func(*version) *version) error {
	db.manifestMu.Lock()
	defer db.manifestMu.Unlock()
	db.mu.Lock()
	m := db.manifest
	m.SSTables = append([]manifestSSTable(nil), m.SSTables...)
	ssts := db.current.cloneSSTables()
	edit(&m, ssts)
	db.mu.Unlock()
	if err := writeManifest(db.opts.FS, db.dir, &m); err != nil {
		return err
	}
	db.mu.Lock()
	// NextFileNum may have moved while the manifest was written; keep the
	// larger so numbers are never reused.
	m.NextFileNum = max(m.NextFileNum, db.manifest.NextFileNum)
	db.manifest = m
	shape := next(db.current)
	replaced := db.installVersionLocked(newVersion(shape.mem, shape.imms, ssts))
	db.mu.Unlock()
	replaced.unref()
	return nil
}
