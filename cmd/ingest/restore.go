package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer/consumer"
)

// Snapshot restore.
//
// A snapshot is a crash-consistent copy of a storage node's storage
// directory (<data>/storage): taken while the node is stopped, or as a
// filesystem or volume snapshot of a running one (the store recovers from
// a crash-consistent image as from a crash). It holds the node's SSTables,
// manifest and WAL, and in the same store, written atomically with the
// data, each shard writer's checkpoint: the stream sequence the shard's
// data covers. A node started with --restore-from and no store of its own
// copies the snapshot in, gives its own consumers the checkpoints of the
// snapshot's node (--restore-node), and its shard writers then replay only
// what the stream holds after them, instead of the whole stream. The
// checkpoints of every shard are copied, owned or not: the store holds
// each shard's data up to its checkpoint, and a shard this node gains
// later must resume there, not replay onto counters that already count
// it.

// restoreSnapshot copies the snapshot directory src into storageDir when
// storageDir has no store yet, and reports whether it did. The copy goes
// to a temporary directory renamed into place at the end, so a crash
// during the copy leaves no half store that a restart would take for a
// real one.
func restoreSnapshot(src, storageDir string, logger *slog.Logger) (bool, error) {
	if entries, err := os.ReadDir(storageDir); err == nil && len(entries) > 0 {
		logger.Info("storage already holds a store; --restore-from is not applied", "dir", storageDir, "snapshot", src)
		return false, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cannot read storage directory %s: %w", storageDir, err)
	}
	if _, err := os.Stat(filepath.Join(src, "MANIFEST")); err != nil {
		return false, fmt.Errorf("--restore-from %s is not a storage directory (no MANIFEST): %w", src, err)
	}
	tmp := storageDir + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return false, fmt.Errorf("cannot remove the unfinished restore %s: %w", tmp, err)
	}
	var files int
	var bytes int64
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o750)
		case !d.Type().IsRegular():
			return nil
		}
		n, err := copyFile(path, dst)
		files++
		bytes += n
		return err
	})
	if err != nil {
		return false, fmt.Errorf("cannot copy snapshot %s to %s: %w", src, tmp, err)
	}
	if err := syncDir(tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, storageDir); err != nil {
		return false, fmt.Errorf("cannot move the restored store into place: %w", err)
	}
	if err := syncDir(filepath.Dir(storageDir)); err != nil {
		return false, err
	}
	logger.Info("storage restored from a snapshot", "snapshot", src, "dir", storageDir, "files", files, "bytes", bytes)
	return true, nil
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("cannot copy %s: %w", src, err)
	}
	return n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open directory %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync directory %s: %w", dir, err)
	}
	return nil
}

// adoptCheckpoints gives this node's consumers the checkpoints that the
// consumers of node from had in a restored store: every shard writer's
// (base names fromWriter and toWriter) and the fan-out's.
func adoptCheckpoints(db *storage.DB, shards int, fromWriter, toWriter, fromFanout, toFanout string, logger *slog.Logger) error {
	for s := range shards {
		ck, err := consumer.CopyCheckpoint(db, shardConsumer(fromWriter, s), shardConsumer(toWriter, s))
		if err != nil {
			return err
		}
		logger.Info("restored shard checkpoint", "shard", s, "seq", ck.Seq, "from", shardConsumer(fromWriter, s))
	}
	if fromFanout != "" {
		if _, err := consumer.CopyCheckpoint(db, fromFanout, toFanout); err != nil {
			return err
		}
	}
	return nil
}
