package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventide/eventide/bucket"
	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/internal/queryrpc"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer/consumer"
)

// Per-shard snapshots.
//
// A shard snapshot is a directory shard-<N> holding the SSTables of the
// shard's data, and a SNAPSHOT file naming them, with their sizes and
// checksums, and the stream position they cover: the checkpoint of the
// shard's writer on the node it was taken from. The shard's data is what
// its writer alone writes: the events and counts partitions of the
// shard's event types, and the rows of those types in the type index
// (_type_hours, partitioned by hour with a row per type, so filtered by
// row). Nothing else is in it: the event type settings are every node's
// (catalog.RecordEventTypes at start), and the fan-out's tables are built
// by every node's fan-out worker from the whole stream.
//
// Taking one (POST /admin/shards/{N}/snapshot on --admin, written under
// --snapshot-dir) stops the shard's writer for as long as a flush takes:
// with the writer stopped, its checkpoint and the shard's data in the
// store agree; storage's Snapshot pins them, the writer starts again, and
// the export runs from the pinned SSTables while the shard goes on. The
// directory is written as shard-<N>.tmp-* and renamed into place once
// complete and synced; an older shard-<N> is replaced.
//
// A node started with --restore-shards-from, when it starts the writer of
// a shard (at start, or when the owners bucket gives it the shard) and its
// store holds no checkpoint of that shard, looks for shard-<N> there,
// checks it (the deployment's shard count, stream and subjects; every
// file's size and xxhash64, then storage checks every block), and ingests
// its SSTables and the checkpoint in one step (storage.DB.Ingest): a crash
// leaves all of it or nothing. The writer then resumes after the
// snapshot's checkpoint. The counts and the type index are counters,
// which add up: a store that holds a checkpoint of the shard has counted
// some of its events already, so there the snapshot is not imported and
// the shard replays from its own checkpoint (a log line says so). A
// snapshot that fails a check is reported and not imported; the shard
// replays from the stream as without one.

const (
	// shardSnapshotMetaFile names a shard snapshot's description.
	shardSnapshotMetaFile = "SNAPSHOT"
	// shardSnapshotFormat is the version of the SNAPSHOT file; 1: first.
	shardSnapshotFormat = 1
)

// shardSnapshotTables are the tables a shard's data is in.
var shardSnapshotTables = []string{schema.EventsTable, schema.CountsTable, schema.TypeHoursTable}

// shardSnapshotMeta is the SNAPSHOT file (JSON).
type shardSnapshotMeta struct {
	Format             int    `json:"format"`
	Shard              int    `json:"shard"`
	Shards             int    `json:"shards"`
	Stream             string `json:"stream"`
	EventSubjectPrefix string `json:"event_subject_prefix"`
	// Node and Consumer are the node and the consumer whose checkpoint
	// the data covers.
	Node     string              `json:"node"`
	Consumer string              `json:"consumer"`
	Epoch    uint64              `json:"checkpoint_epoch"`
	Seq      uint64              `json:"checkpoint_seq"`
	Created  time.Time           `json:"created"`
	Files    []shardSnapshotFile `json:"files"`
}

type shardSnapshotFile struct {
	Table string `json:"table"`
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	XXH64 string `json:"xxh64"`
	Cells int64  `json:"cells"`
}

func shardSnapshotDirName(s int) string { return "shard-" + strconv.Itoa(s) }

// shardKeep returns the filter of shard s's data in table.
func shardKeep(table string, s, shards int, prefix string) func(partition, clustering []byte) bool {
	if table == schema.TypeHoursTable {
		return func(_, clustering []byte) bool {
			if clustering == nil {
				return false // no deletions in the type index
			}
			vals, err := schema.TypeHoursClustering.Decode(clustering)
			if err != nil {
				return false
			}
			typ, _ := vals[0].(string)
			return bucket.EventShard(prefix, typ, shards) == s
		}
	}
	return func(partition, _ []byte) bool { return queryrpc.ShardOf(table, partition, shards, prefix) == s }
}

// writeShardSnapshot exports shard s of snap, whose data covers ck, as
// dir/shard-<s>, replacing an older one.
func writeShardSnapshot(ctx context.Context, snap *storage.Snapshot, meta shardSnapshotMeta, dir string) (shardSnapshotMeta, error) {
	s := meta.Shard
	tmp, err := os.MkdirTemp(dir, shardSnapshotDirName(s)+".tmp-")
	if err != nil {
		return meta, fmt.Errorf("cannot create a directory for the snapshot of shard %d: %w", s, err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	next := 1
	for _, table := range shardSnapshotTables {
		outs, err := snap.ExportTable(ctx, tmp, table, next, shardKeep(table, s, meta.Shards, meta.EventSubjectPrefix))
		if err != nil {
			return meta, err
		}
		next += len(outs)
		for _, o := range outs {
			sum, size, err := fileXXH64(filepath.Join(tmp, o.Name))
			if err != nil {
				return meta, err
			}
			meta.Files = append(meta.Files, shardSnapshotFile{Table: table, Name: o.Name, Size: size, XXH64: sum, Cells: o.Cells})
		}
	}
	buf, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return meta, fmt.Errorf("cannot encode the snapshot of shard %d: %w", s, err)
	}
	if err := writeFileSynced(filepath.Join(tmp, shardSnapshotMetaFile), buf); err != nil {
		return meta, err
	}
	if err := syncDir(tmp); err != nil {
		return meta, err
	}
	final := filepath.Join(dir, shardSnapshotDirName(s))
	old := ""
	if _, err := os.Stat(final); err == nil {
		old = fmt.Sprintf("%s.old-%d", final, time.Now().UnixNano())
		if err := os.Rename(final, old); err != nil {
			return meta, fmt.Errorf("cannot move the older snapshot %s away: %w", final, err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return meta, fmt.Errorf("cannot move the snapshot of shard %d into place: %w", s, err)
	}
	done = true
	if err := syncDir(dir); err != nil {
		return meta, err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return meta, fmt.Errorf("cannot remove the older snapshot %s: %w", old, err)
		}
	}
	return meta, nil
}

func writeFileSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

func fileXXH64(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := xxhash.New()
	size, err = io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return strconv.FormatUint(h.Sum64(), 16), size, nil
}

// errNoShardSnapshot is returned by readShardSnapshot when the directory
// holds no snapshot of the shard.
var errNoShardSnapshot = errors.New("no snapshot of the shard")

// readShardSnapshot reads and checks the snapshot of shard s in dir
// against the deployment (shards, stream, subjects) and its files' sizes
// and checksums.
func readShardSnapshot(dir string, s, shards int, stream, prefix string) (shardSnapshotMeta, string, error) {
	sdir := filepath.Join(dir, shardSnapshotDirName(s))
	var meta shardSnapshotMeta
	buf, err := os.ReadFile(filepath.Join(sdir, shardSnapshotMetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return meta, sdir, fmt.Errorf("%w in %s", errNoShardSnapshot, sdir)
	}
	if err != nil {
		return meta, sdir, fmt.Errorf("cannot read the snapshot of shard %d: %w", s, err)
	}
	if meta, err = decodeShardSnapshot(buf, sdir, s, shards, stream, prefix); err != nil {
		return meta, sdir, err
	}
	for _, f := range meta.Files {
		sum, size, err := fileXXH64(filepath.Join(sdir, f.Name))
		if err != nil {
			return meta, sdir, fmt.Errorf("snapshot %s: %w", sdir, err)
		}
		if size != f.Size || sum != f.XXH64 {
			return meta, sdir, fmt.Errorf("snapshot %s: file %s is corrupt: %d bytes with xxh64 %s, want %d bytes with %s: %w",
				sdir, f.Name, size, sum, f.Size, f.XXH64, storage.ErrCorruption)
		}
	}
	return meta, sdir, nil
}

// decodeShardSnapshot decodes the SNAPSHOT file of directory sdir and
// checks it against the deployment: shard s of shards, stream, subject
// prefix; and that it names only files of sdir, of the shard's tables.
func decodeShardSnapshot(buf []byte, sdir string, s, shards int, stream, prefix string) (shardSnapshotMeta, error) {
	var meta shardSnapshotMeta
	if err := json.Unmarshal(buf, &meta); err != nil {
		return meta, fmt.Errorf("cannot decode %s: %w", filepath.Join(sdir, shardSnapshotMetaFile), err)
	}
	switch {
	case meta.Format != shardSnapshotFormat:
		return meta, fmt.Errorf("snapshot %s: format %d, want %d", sdir, meta.Format, shardSnapshotFormat)
	case meta.Shard != s || meta.Shards != shards:
		return meta, fmt.Errorf("snapshot %s is of shard %d of %d, want shard %d of %d", sdir, meta.Shard, meta.Shards, s, shards)
	case meta.Stream != stream || meta.EventSubjectPrefix != prefix:
		return meta, fmt.Errorf("snapshot %s is of stream %s (subjects %s>), want %s (%s>)", sdir, meta.Stream, meta.EventSubjectPrefix, stream, prefix)
	}
	for _, f := range meta.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || filepath.Dir(filepath.Join(sdir, f.Name)) != filepath.Clean(sdir) ||
			f.Name == shardSnapshotMetaFile || !slices.Contains(shardSnapshotTables, f.Table) {
			return meta, fmt.Errorf("snapshot %s names a file %q of table %q it cannot hold", sdir, f.Name, f.Table)
		}
	}
	return meta, nil
}

// errNothingToSnapshot is returned by snapshotShard for a shard this
// node's store has no checkpoint of: it has applied nothing of it.
var errNothingToSnapshot = errors.New("this node's store has no checkpoint of it")

// startSnapshots writes a snapshot of every shard the node runs every
// interval, until shutdown stops it.
func (n *node) startSnapshots(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	n.snapshotsCancel, n.snapshotsDone = cancel, make(chan struct{})
	go func() {
		defer close(n.snapshotsDone)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, s := range n.shards.owned() {
				if ctx.Err() != nil {
					return
				}
				if _, err := n.snapshotShard(ctx, s); ctx.Err() != nil {
					return // shutdown: the unfinished snapshot is removed
				} else if errors.Is(err, errNothingToSnapshot) {
					n.logger.Debug("no snapshot of a shard with nothing applied yet", "shard", s)
				} else if err != nil {
					n.logger.Warn("periodic shard snapshot failed", "shard", s, "err", err)
				}
			}
		}
	}()
}

// snapshotShard writes a snapshot of shard s of this node's store under
// --snapshot-dir: with the shard's writer stopped while storage is
// flushed, so the data and the checkpoint agree.
func (n *node) snapshotShard(ctx context.Context, s int) (shardSnapshotMeta, error) {
	sc := n.cfg.Shard
	sw := n.shards
	if sw == nil || sc.SnapshotDir == "" {
		return shardSnapshotMeta{}, errors.New("shard snapshots need --shards above 1 and --snapshot-dir")
	}
	if s < 0 || s >= sc.Shards {
		return shardSnapshotMeta{}, fmt.Errorf("no shard %d: the deployment has %d", s, sc.Shards)
	}
	name := shardConsumer(sw.base.Consumer, s)
	var ck consumer.Checkpoint
	var snap *storage.Snapshot
	err := sw.paused(s, func() error {
		var err error
		if ck, err = consumer.ReadCheckpoint(n.db, name); err != nil {
			return err
		}
		snap, err = n.db.Snapshot()
		return err
	})
	if err != nil {
		return shardSnapshotMeta{}, fmt.Errorf("cannot take a snapshot of shard %d: %w", s, err)
	}
	defer snap.Close()
	if ck.Seq == 0 {
		return shardSnapshotMeta{}, fmt.Errorf("cannot take a snapshot of shard %d: %w (%s)", s, errNothingToSnapshot, name)
	}
	if err := os.MkdirAll(sc.SnapshotDir, 0o750); err != nil {
		return shardSnapshotMeta{}, fmt.Errorf("cannot create --snapshot-dir: %w", err)
	}
	meta := shardSnapshotMeta{Format: shardSnapshotFormat, Shard: s, Shards: sc.Shards, Stream: sw.base.Stream,
		EventSubjectPrefix: eventSubjectPrefix(sw.base), Node: sc.NodeID, Consumer: name, Epoch: ck.Epoch, Seq: ck.Seq,
		Created: time.Now().UTC()}
	start := time.Now()
	meta, err = writeShardSnapshot(ctx, snap, meta, sc.SnapshotDir)
	if err != nil {
		return meta, err
	}
	var bytes int64
	for _, f := range meta.Files {
		bytes += f.Size
	}
	n.logger.Info("shard snapshot written", "shard", s, "dir", filepath.Join(sc.SnapshotDir, shardSnapshotDirName(s)),
		"checkpoint", ck.Seq, "files", len(meta.Files), "bytes", bytes, "took", time.Since(start).Round(time.Millisecond))
	return meta, nil
}

// Results of a shard's start with --restore-shards-from, the values of
// eventide_shard_snapshot_imports_total's label result.
const (
	importImported = "imported" // the snapshot was ingested
	importRefused  = "refused"  // the store holds a checkpoint of the shard
	importMissing  = "missing"  // no snapshot of the shard in the directory
	importFailed   = "failed"   // the snapshot failed a check, or the ingest failed
)

// newSnapshotImports registers eventide_shard_snapshot_imports_total on
// reg, every result at 0 so that alerts see the series before the first
// import.
func newSnapshotImports(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eventide_shard_snapshot_imports_total",
		Help: "Shard starts that looked for a per-shard snapshot (--restore-shards-from), by result: imported, refused (the store holds a checkpoint of the shard), missing (no snapshot), failed (a check or the ingest failed; the shard replays from the stream).",
	}, []string{"result"})
	for _, r := range []string{importImported, importRefused, importMissing, importFailed} {
		c.WithLabelValues(r)
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("cannot register the shard snapshot import metric: %w", err)
	}
	return c, nil
}

// importShardSnapshot imports the snapshot of shard s from dir into db
// for the writer's consumer name, when db holds no checkpoint of it. It
// logs what it did and why; an error means nothing was imported and the
// shard replays from the stream.
func importShardSnapshot(db *storage.DB, dir string, s, shards int, stream, prefix, name string, logger *slog.Logger) (string, error) {
	have, err := consumer.ReadCheckpoint(db, name)
	if err != nil {
		return importFailed, err
	}
	if have.Seq != 0 || have.Epoch != 0 {
		logger.Info("shard has a checkpoint in this store: its snapshot is not imported (counters would count twice); replaying from the stream after the checkpoint",
			"shard", s, "consumer", name, "checkpoint", have.Seq)
		return importRefused, nil
	}
	meta, sdir, err := readShardSnapshot(dir, s, shards, stream, prefix)
	if errors.Is(err, errNoShardSnapshot) {
		logger.Info("no snapshot of the shard to import; replaying it from the stream", "shard", s, "dir", dir)
		return importMissing, nil
	}
	if err != nil {
		return importFailed, err
	}
	start := time.Now()
	files := make([]storage.IngestSSTable, 0, len(meta.Files))
	var bytes int64
	for _, f := range meta.Files {
		files = append(files, storage.IngestSSTable{Table: f.Table, Path: filepath.Join(sdir, f.Name)})
		bytes += f.Size
	}
	var b storage.Batch
	consumer.PutCheckpoint(&b, name, consumer.Checkpoint{Epoch: meta.Epoch, Seq: meta.Seq})
	if err := db.Ingest(files, &b); err != nil {
		return importFailed, fmt.Errorf("cannot import the snapshot %s: %w", sdir, err)
	}
	logger.Info("shard imported from a snapshot; replaying the stream after its checkpoint", "shard", s, "snapshot", sdir,
		"from_node", meta.Node, "checkpoint", meta.Seq, "files", len(files), "bytes", bytes, "took", time.Since(start).Round(time.Millisecond))
	return importImported, nil
}

// shardSnapshotHandler serves POST /admin/shards/{shard}/snapshot.
func (n *node) shardSnapshotHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	s, err := strconv.Atoi(r.PathValue("shard"))
	if err != nil {
		http.Error(w, "shard must be a number", http.StatusBadRequest)
		return
	}
	meta, err := n.snapshotShard(r.Context(), s)
	if err != nil {
		n.logger.Error("shard snapshot failed", "shard", s, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(meta)
}
