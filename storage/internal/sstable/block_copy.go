package sstable

// This file holds the block copy of compactions: a data block that a merge
// passes through unchanged (its cells neither reconciled with another
// input's, nor shadowed, nor purged) is written to the new file as the
// input's frame, bytes for bytes, instead of being re-encoded and
// re-compressed cell by cell.

import (
	"encoding/binary"
	"fmt"

	"github.com/eventide/eventide/storage/internal/base"
)

// BlockStart reports whether the scanner's current cell is the first of
// its data block, and returns that block's metadata (its key slices are
// valid while the scanner holds the block). A merge uses it to ask
// whether the whole block comes before every other input's next cell.
func (s *Scanner) BlockStart() (BlockMeta, bool) {
	if !s.has || s.err != nil || s.blk == nil || s.ci != 1 {
		return BlockMeta{}, false
	}
	h := s.pg.blocks.handle(s.bi - 1)
	return h.meta, true
}

// BlockCells calls keep for each cell of the scanner's current block, in
// order, until it returns false, and reports whether every call returned
// true. The cell passed to keep is valid for the call only.
func (s *Scanner) BlockCells(keep func(*base.Cell) bool) bool {
	if s.blk == nil {
		return false
	}
	var c base.Cell
	for i := range s.blk.len() {
		s.blk.cell(i, &c)
		if !keep(&c) {
			return false
		}
	}
	return true
}

// CopiesBlocks reports whether CopyBlock may copy anything into this
// file: not into a zstd file, whose blocks are shaped and may be
// compressed against its dictionary.
func (w *Writer) CopiesBlocks() bool { return w.opts.Compression != CompressionZstd }

// CopyBlock appends the scanner's current data block, whose first cell is
// the scanner's current cell (BlockStart), to the current partition as
// its stored frame, and moves the scanner past the block: its next
// NextCell returns the first cell after it. The caller vouches that the
// block's cells belong in the output unchanged, in place of Add for each.
//
// It copies nothing and returns false, leaving the scanner where it was,
// when a copy would not be what Add would have written, or would write a
// worse file: the scanner is not at a block's start; the block's cells do
// not sort after the partition's last cell; the frame's compression is
// neither none nor this file's (a zstd file never copies: its blocks are
// shaped and compressed against its dictionary); the input's format
// version differs; it would be a partition's first block and is larger
// than a head block may be (headBlockSize); or the block being built
// holds cells and the copied block would fit beside them (so a merge of
// runs does not leave a small block at each run's end; the caller adds the
// cells instead, and copies the next block); or the block is larger
// than this file's block size. Otherwise the block being built, if any,
// is written first. A frame whose checksum does not match its bytes (it
// is read again from the file, when its block came from the cache or the
// read-ahead moved on) stops the scanner with an error wrapping
// base.ErrCorruption.
func (w *Writer) CopyBlock(s *Scanner) (bool, error) {
	if err := w.usable("copy block"); err != nil {
		return false, err
	}
	if !w.inPartition {
		return false, fmt.Errorf("cannot copy block: no partition started")
	}
	if _, ok := s.BlockStart(); !ok || !w.dictDone || !w.CopiesBlocks() ||
		s.r.props.FormatVersion != formatVersion {
		return false, nil
	}
	i := s.bi - 1
	h := s.pg.blocks.handle(i)
	var first, last base.Cell
	s.blk.cell(0, &first)
	s.blk.cell(s.blk.len()-1, &last)
	if w.haveCell && base.CompareCellKeys(w.lastCK, w.lastCol, first.Clustering, first.Column) >= 0 {
		return false, nil
	}
	target := w.opts.BlockSize
	if w.cur.numBlocks == 0 {
		target = min(target, headBlockSize)
	}
	if int(h.rawLen) > w.opts.BlockSize {
		return false, nil
	}
	if w.blk.empty() {
		if w.cur.numBlocks == 0 && int(h.rawLen) > target {
			return false, nil
		}
	} else if w.blk.size()+int(h.rawLen) <= target {
		return false, nil
	}
	frame, err := s.ra.frame(s.r, s.pg.blocks.fileOffs[i], int(h.frameLen()))
	if err != nil {
		s.err = s.r.wrapAt(s.pg.blocks.fileOffs[i], "data block", err)
		s.has = false
		return false, s.err
	}
	c := Compression(frame[h.storedLen])
	if c != CompressionNone && c != w.opts.Compression {
		return false, nil
	}
	// The frame was verified when the block was decoded, but it may have
	// been read again since (a cached block, or the read-ahead refilled):
	// the new file must not take a frame whose bytes were not checked.
	if got, want := binary.LittleEndian.Uint32(frame[h.storedLen+1:]), blockChecksum(frame[:h.storedLen], c); got != want {
		s.err = s.r.wrapAt(s.pg.blocks.fileOffs[i], "data block", base.CorruptionErrorf("cannot verify block checksum: got %#08x, want %#08x", got, want))
		s.has = false
		return false, s.err
	}
	if !w.blk.empty() {
		if err := w.flushBlock(true); err != nil {
			return false, err
		}
	}
	if err := w.write(frame); err != nil {
		return false, err
	}
	w.frameWritten(&h, len(frame))

	if !w.haveCell {
		w.ckBufs[0] = append(w.ckBufs[0][:0], first.Clustering...)
		w.cur.MinClustering = w.ckBufs[0]
	}
	w.lastCK = append(w.lastCK[:0], last.Clustering...)
	w.lastCol = append(w.lastCol[:0], last.Column...)
	w.haveCell = true
	w.cur.Cells += int64(h.meta.Cells)
	w.cur.MinTimestamp = min(w.cur.MinTimestamp, h.meta.MinTimestamp)
	w.cur.MaxTimestamp = max(w.cur.MaxTimestamp, h.meta.MaxTimestamp)
	w.cur.MaxLocalDeletionTime = max(w.cur.MaxLocalDeletionTime, h.meta.MaxLocalDeletionTime)
	var cell base.Cell
	for j := range s.blk.len() {
		s.blk.cell(j, &cell)
		w.countCell(&cell)
	}
	s.ci = s.blk.len()
	w.blockAdded(int(h.rawLen))
	return true, nil
}
