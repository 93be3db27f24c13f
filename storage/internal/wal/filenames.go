package wal

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eventide/eventide/storage/vfs"
)

// The WAL directory holds only segment files, named NNNNNN.wal with the
// segment number in decimal, zero-padded to at least six digits. Other names
// are ignored, so the directory may be shared with unrelated files.
const segmentSuffix = ".wal"

// SegmentFileName returns the file name of segment num, e.g. "000042.wal".
func SegmentFileName(num uint64) string { return fmt.Sprintf("%06d%s", num, segmentSuffix) }

// ParseSegmentFileName returns the segment number of a segment file name. Only
// the exact form SegmentFileName produces is accepted, so two names can never
// claim one number.
func ParseSegmentFileName(name string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok {
		return 0, false
	}
	num, err := strconv.ParseUint(stem, 10, 64)
	if err != nil || SegmentFileName(num) != name {
		return 0, false
	}
	return num, true
}

func segmentPath(dir string, num uint64) string { return filepath.Join(dir, SegmentFileName(num)) }

// ListSegments returns the numbers of the segment files in dir, ascending.
func ListSegments(fs vfs.FS, dir string) ([]uint64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list wal directory %s: %w", dir, err)
	}
	var nums []uint64
	for _, name := range names {
		if num, ok := ParseSegmentFileName(name); ok {
			nums = append(nums, num)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// DeleteSegmentsBefore removes every segment numbered below num and syncs the
// directory, returning how many it removed. The caller guarantees that those
// segments are no longer needed (their records are flushed) and that none of
// them is the segment a Writer is appending to.
func DeleteSegmentsBefore(fs vfs.FS, dir string, num uint64) (deleted int, err error) {
	nums, err := ListSegments(fs, dir)
	if err != nil {
		return 0, err
	}
	for _, n := range nums {
		if n >= num {
			break
		}
		if err := fs.Remove(segmentPath(dir, n)); err != nil {
			return deleted, fmt.Errorf("cannot remove wal segment %s: %w", segmentPath(dir, n), err)
		}
		deleted++
	}
	if deleted > 0 {
		if err := fs.SyncDir(dir); err != nil {
			return deleted, fmt.Errorf("cannot sync wal directory %s: %w", dir, err)
		}
	}
	return deleted, nil
}
