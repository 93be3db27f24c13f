package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/eventide/eventide/storage/internal/base"
	"github.com/eventide/eventide/storage/vfs"
)

// The MANIFEST file records which SSTables are live, the table
// definitions, and the first WAL segment not yet flushed. It is rewritten
// whole on every change (it is small: one entry per table and per SSTable)
// by writing MANIFEST.tmp, fsyncing it, renaming it over MANIFEST and
// fsyncing the directory, so a crash leaves either the old or the new one.
//
//	offset  size  field
//	0       8     magic "EVTDMANI"
//	8       4     format version, little-endian uint32 (manifestFormatVersion)
//	12      4     payload length N, little-endian uint32
//	16      4     CRC-32C (Castagnoli) of the payload, little-endian
//	20      N     payload: JSON of manifestData
//
// Versions: 1 = first version.
const (
	manifestMagic         = "EVTDMANI"
	manifestFormatVersion = 1
	manifestHeaderSize    = 20
	maxManifestSize       = 256 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

type manifestTable struct {
	ID  uint32   `json:"id"`
	Def TableDef `json:"def"`
}

type manifestSSTable struct {
	FileNum uint64 `json:"file"`
	TableID uint32 `json:"table"`
	Size    int64  `json:"size"`
}

type manifestData struct {
	NextFileNum uint64 `json:"next_file_num"`
	// MinUnflushedWAL is the first WAL segment whose records are not all
	// in SSTables: recovery replays it and every later one.
	MinUnflushedWAL uint64            `json:"min_unflushed_wal"`
	NextTableID     uint32            `json:"next_table_id"`
	Tables          []manifestTable   `json:"tables"`
	SSTables        []manifestSSTable `json:"sstables"`
}

func encodeManifest(m *manifestData) ([]byte, error) {
	payload, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cannot encode manifest: %w", err)
	}
	buf := make([]byte, manifestHeaderSize, manifestHeaderSize+len(payload))
	copy(buf, manifestMagic)
	binary.LittleEndian.PutUint32(buf[8:], manifestFormatVersion)
	binary.LittleEndian.PutUint32(buf[12:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[16:], crc32.Checksum(payload, crc32c))
	return append(buf, payload...), nil
}

func decodeManifest(path string, buf []byte) (*manifestData, error) {
	if len(buf) < manifestHeaderSize {
		return nil, base.CorruptionErrorf("manifest %s: %d bytes, shorter than its %d-byte header", path, len(buf), manifestHeaderSize)
	}
	if string(buf[:8]) != manifestMagic {
		return nil, base.CorruptionErrorf("manifest %s: bad magic %q, want %q", path, buf[:8], manifestMagic)
	}
	if v := binary.LittleEndian.Uint32(buf[8:]); v != manifestFormatVersion {
		return nil, base.CorruptionErrorf("manifest %s: format version %d, want %d", path, v, manifestFormatVersion)
	}
	n := binary.LittleEndian.Uint32(buf[12:])
	if uint64(n) != uint64(len(buf)-manifestHeaderSize) {
		return nil, base.CorruptionErrorf("manifest %s: payload length %d, file holds %d", path, n, len(buf)-manifestHeaderSize)
	}
	payload := buf[manifestHeaderSize:]
	if got, want := crc32.Checksum(payload, crc32c), binary.LittleEndian.Uint32(buf[16:]); got != want {
		return nil, base.CorruptionErrorf("manifest %s: checksum %#x, want %#x", path, got, want)
	}
	var m manifestData
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, base.CorruptionErrorf("manifest %s: cannot decode payload: %v", path, err)
	}
	return &m, nil
}

// readManifest returns the manifest, or nil if the directory has none.
func readManifest(fsys vfs.FS, dir string) (*manifestData, error) {
	path := filepath.Join(dir, manifestFileName)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open manifest: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot stat manifest %s: %w", path, err)
	}
	if st.Size() > maxManifestSize {
		return nil, base.CorruptionErrorf("manifest %s: %d bytes, larger than the %d limit", path, st.Size(), maxManifestSize)
	}
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("cannot read manifest %s: %w", path, err)
	}
	return decodeManifest(path, buf)
}

// writeManifest durably replaces the manifest.
func writeManifest(fsys vfs.FS, dir string, m *manifestData) error {
	buf, err := encodeManifest(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestTmpFileName)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", tmp, err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, manifestFileName)); err != nil {
		return fmt.Errorf("cannot install manifest: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: cannot sync directory %s: %w", errManifestUnsynced, dir, err)
	}
	return nil
}

// errManifestUnsynced marks a writeManifest failure after the rename: the
// new manifest may be what a restart reads, so the files it names must be
// kept, and the failure is not retried.
var errManifestUnsynced = errors.New("new manifest installed but its directory is not synced")
