package storage

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Every file the engine keeps in its directory:
//
//	LOCK            advisory lock: one process per directory
//	MANIFEST        the live files and table definitions (manifest.go)
//	MANIFEST.tmp    a manifest being written; removed on open
//	NNNNNN.wal      WAL segments (package wal)
//	NNNNNN.sst      SSTables (package sstable)
//	NNNNNN.sst.tmp  an SSTable being written; removed on open
const (
	lockFileName        = "LOCK"
	manifestFileName    = "MANIFEST"
	manifestTmpFileName = "MANIFEST.tmp"
	walDirName          = "wal"
	sstableSuffix       = ".sst"
	tmpSuffix           = ".tmp"
)

func sstableFileName(num uint64) string { return fmt.Sprintf("%06d%s", num, sstableSuffix) }

func sstablePath(dir string, num uint64) string { return filepath.Join(dir, sstableFileName(num)) }

// parseSSTableFileName returns the file number of an SSTable name.
func parseSSTableFileName(name string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, sstableSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	return n, err == nil
}
