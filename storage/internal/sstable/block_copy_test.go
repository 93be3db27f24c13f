package sstable

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

// copyTable writes every partition of r to a new file with opts, copying
// each block CopyBlock takes and adding the cells of the others, and
// returns the file and how many blocks were copied.
func copyTable(t *testing.T, r *Reader, opts WriterOptions) (*memFile, Properties, int) {
	t.Helper()
	f := &memFile{}
	w := NewWriter(f, opts)
	s := r.NewScanner()
	defer s.Close()
	copied := 0
	for s.NextPartition() {
		info := s.Partition()
		if err := w.StartPartition(info.Key, info.Deletions); err != nil {
			t.Fatal(err)
		}
		have := s.NextCell()
		for have {
			ok, err := w.CopyBlock(s)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				copied++
			} else if err := w.Add(s.Cell()); err != nil {
				t.Fatal(err)
			}
			have = s.NextCell()
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	props, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return f, props, copied
}

// TestCopyBlock copies random files block by block into files of every
// compression: the copies must hold exactly the cells, deletions and
// properties of the input, pass Check, and blocks must be copied only
// where the frame's compression is none or the new file's (a zstd file's
// S2 head blocks, or a block stored uncompressed, may go into an S2 file),
// never into a zstd file.
func TestCopyBlock(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 5))
	for _, in := range []Compression{CompressionS2, CompressionNone, CompressionZstd} {
		for _, out := range []Compression{CompressionS2, CompressionNone, CompressionZstd} {
			parts := randomTable(rng, 1+rng.IntN(8), 400)
			src, _ := writeTable(t, parts, WriterOptions{Compression: in, BlockSize: 1 << 10})
			r := openTable(t, src, nil)
			f, props, copied := copyTable(t, r, WriterOptions{Compression: out, BlockSize: 1 << 10})
			blocks := r.Properties().DataBlocks
			switch {
			case out == CompressionZstd && copied > 0:
				t.Fatalf("seed %d: %v into zstd: %d blocks copied", seed, in, copied)
			case in == out && out != CompressionZstd && blocks > 10 && copied == 0:
				t.Fatalf("seed %d: %v into %v: none of %d blocks copied", seed, in, out, blocks)
			}
			got := openTable(t, f, nil)
			if err := got.Check(); err != nil {
				t.Fatalf("seed %d: %v into %v: %v", seed, in, out, err)
			}
			if dump(t, got) != dump(t, r) {
				t.Fatalf("seed %d: %v into %v: the copy holds other cells", seed, in, out)
			}
			gp, wp := comparableProps(props), comparableProps(r.Properties())
			gp.Compression = wp.Compression
			if fmt.Sprintf("%+v", gp) != fmt.Sprintf("%+v", wp) {
				t.Fatalf("seed %d: %v into %v: properties\n%+v\nwant\n%+v", seed, in, out, gp, wp)
			}
			t.Logf("%v into %v: %d of %d blocks copied", in, out, copied, blocks)
		}
	}
}

// dump prints every partition, deletion and cell of r.
func dump(t *testing.T, r *Reader) string {
	t.Helper()
	var out []byte
	s := r.NewScanner()
	defer s.Close()
	for s.NextPartition() {
		info := s.Partition()
		out = append(out, info.Key...)
		out = append(out, '\n')
		for _, rt := range info.Deletions.Ranges {
			out = append(out, cellString(&base.Cell{Clustering: rt.Start.Key, Timestamp: rt.Deletion.MarkedForDeleteAt})...)
		}
		for s.NextCell() {
			out = append(out, cellString(s.Cell())...)
			out = append(out, '\n')
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestCopyBlockVerifiesFrame damages a block's frame in the file after
// the block was read into the cache: the scanner decodes it from the
// cache, so only CopyBlock's own check of the frame it copies can see the
// damage, which must be an error wrapping base.ErrCorruption, not a
// damaged block in the new file.
func TestCopyBlockVerifiesFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	part := randomPartition(rng, []byte("p"), 300)
	src, _ := writeTable(t, []testPartition{part}, WriterOptions{Compression: CompressionS2, BlockSize: 1 << 10})
	r := openTable(t, src, NewCache(1<<20))
	defer r.Close()
	info, ok, err := r.FindPartition([]byte("p"))
	if err != nil || !ok {
		t.Fatalf("FindPartition: %v %v", ok, err)
	}
	it := r.NewPartitionIter(info, IterOptions{Start: base.Unbounded, End: base.Unbounded})
	if n := len(collect(t, it)); n != len(part.cells) {
		t.Fatalf("read %d cells, want %d", n, len(part.cells))
	}
	src.data[3] ^= 0x40 // in the first block's payload

	w := NewWriter(&memFile{}, WriterOptions{Compression: CompressionS2, BlockSize: 1 << 10})
	s := r.NewScanner()
	defer s.Close()
	if !s.NextPartition() || !s.NextCell() {
		t.Fatalf("scanner: %v", s.Err())
	}
	if err := w.StartPartition([]byte("p"), liveDel()); err != nil {
		t.Fatal(err)
	}
	copied, err := w.CopyBlock(s)
	if copied || !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("CopyBlock of a damaged frame: copied %v, error %v; want an error wrapping base.ErrCorruption", copied, err)
	}
}
