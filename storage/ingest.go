package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/eventide/eventide/storage/internal/memtable"
	"github.com/eventide/eventide/storage/internal/sstable"
)

// Ingesting external SSTables.
//
// DB.Ingest adds SSTables written elsewhere (Snapshot.ExportTable of
// another store) to the store, together with a batch of mutations (the
// position the data covers, typically), in one manifest edit: after a
// crash the store holds all of them or none. Each file is copied into the
// store under a new file number and a temporary name, synced, and checked
// whole (every block's checksum, decoding and order) before anything is
// installed; a copy that a crash leaves behind is not named by the
// manifest and Open removes it as an orphan. The batch is written as
// SSTables of its own (like a flush of a memtable holding only it), not
// through the WAL, so that it is installed by the same edit.
//
// Ingested cells merge with the store's by the usual rules: the highest
// timestamp wins, so ingesting data that the store already holds, older
// or newer, changes nothing for ordinary tables. Counter cells add up:
// ingesting a counter table's cells into a store that already counted the
// same events counts them twice, and only the caller knows whether it
// did. Tombstones the store purged before the ingest cannot shadow what
// the ingest brings back; a caller ingests only data its store never
// held.

// IngestSSTable names an SSTable file to ingest and the table it holds.
type IngestSSTable struct {
	Table string
	Path  string
}

// Ingest atomically adds the SSTables files and the mutations of b (nil
// or empty: none) to the store. It returns an error wrapping
// ErrCorruption, naming the file, when a file fails its check; nothing is
// installed then.
func (db *DB) Ingest(files []IngestSSTable, b *Batch) (err error) {
	db.mu.Lock()
	closed, bgErr := db.closed, db.bgErr
	db.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case bgErr != nil:
		return fmt.Errorf("cannot ingest: %w", bgErr)
	}
	var added []*sstHandle
	defer func() {
		if err != nil {
			for _, h := range added {
				h.discard()
			}
		}
	}()
	for _, in := range files {
		db.mu.Lock()
		t, lerr := db.lookupTableLocked(in.Table)
		db.mu.Unlock()
		if lerr != nil {
			return fmt.Errorf("cannot ingest %s: %w", in.Path, lerr)
		}
		h, err := db.copyInSSTable(t, in.Path)
		if err != nil {
			return err
		}
		added = append(added, h)
	}
	if b != nil && b.Len() > 0 {
		now := db.opts.Clock.Now()
		counterMicros := db.nextCounterMicros(now.UnixMicro())
		db.mu.Lock()
		err := b.resolve(db.lookupTableLocked, now.Unix(), counterMicros)
		db.mu.Unlock()
		if err != nil {
			return fmt.Errorf("cannot ingest a batch: %w", err)
		}
		mem := memtable.NewAccounted(db.metrics.memtableMapped)
		for i := range b.mutations {
			db.applyToMemtable(mem, &b.mutations[i])
		}
		for _, tableID := range mem.Tables() {
			db.mu.Lock()
			t := db.tablesByID[tableID]
			db.mu.Unlock()
			h, err := db.writeSSTable(t, longLived, nil, func(w *sstable.Writer) error { return writeMemtable(w, mem, tableID) })
			if err != nil {
				return err
			}
			added = append(added, h)
		}
	}
	if len(added) == 0 {
		return nil
	}
	err = db.editManifest(func(m *manifestData, ssts map[uint32][]*sstHandle) {
		for _, h := range added {
			m.SSTables = append(m.SSTables, manifestSSTable{FileNum: h.fileNum, TableID: h.tableID, Size: h.size})
			ssts[h.tableID] = append(ssts[h.tableID], h)
		}
	}, func(v *version) *version { return v })
	if errors.Is(err, errManifestUnsynced) {
		// The new manifest may be the one a restart reads: keep the files.
		added = nil
	}
	if err != nil {
		return fmt.Errorf("cannot ingest %d sstables: %w", len(added), err)
	}
	db.log.Info("ingested sstables", "files", len(files), "sstables", len(added))
	db.maybeScheduleCompaction()
	return nil
}

// copyInSSTable copies the SSTable at src into the store as a new file of
// table t, synced and checked, and opens it; it is not installed.
func (db *DB) copyInSSTable(t *tableState, src string) (*sstHandle, error) {
	fsys := db.opts.FS
	in, err := fsys.Open(src)
	if err != nil {
		return nil, fmt.Errorf("cannot open sstable %s to ingest it: %w", src, err)
	}
	defer in.Close()
	db.mu.Lock()
	fileNum := db.manifest.NextFileNum
	db.manifest.NextFileNum++
	db.mu.Unlock()
	path := sstablePath(db.dir, fileNum)
	tmp := path + tmpSuffix
	out, err := fsys.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", tmp, err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = db.checkSSTableFile(tmp, fileNum)
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = fsys.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		fsys.Remove(tmp)
		return nil, fmt.Errorf("cannot ingest sstable %s into table %q: %w", src, t.def.Name, err)
	}
	return db.openSSTable(fileNum, t.id)
}

// checkSSTableFile opens the SSTable at path and checks every block.
func (db *DB) checkSSTableFile(path string, fileNum uint64) error {
	f, err := db.opts.FS.Open(path)
	if err != nil {
		return err
	}
	r, err := sstable.Open(f, path, fileNum, nil)
	if err != nil {
		f.Close()
		return err
	}
	err = r.Check()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return err
}
