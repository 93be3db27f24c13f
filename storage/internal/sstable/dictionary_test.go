package sstable

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// blockCodecs counts a file's data blocks by the compression byte of their
// trailers.
func blockCodecs(t *testing.T, r *Reader, data []byte) map[Compression]int {
	t.Helper()
	got := map[Compression]int{}
	for j := range r.top.pages {
		pg, err := r.page(j, fromDisk)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pg.blocks.fileOffs {
			h := pg.blocks.handle(i)
			got[Compression(data[pg.blocks.fileOffs[i]+h.storedLen])]++
		}
	}
	return got
}

// dictionaryTable is 20 hour partitions of 520 JSON events, as
// loadtest/peers writes them.
func dictionaryTable() []testPartition {
	rng := rand.New(rand.NewPCG(1, 0))
	parts := make([]testPartition, 20)
	for i := range parts {
		parts[i] = eventPartition(rng, fmt.Appendf(nil, "%08d|click", 1000+i), 520)
	}
	return parts
}

// TestDictionary checks when a file gets a dictionary and that its data
// blocks are compressed against it: a zstd file with at least
// dictSampleSize bytes of data blocks has one and compresses every data
// block of 256 bytes or more with it; a smaller zstd file, an s2 or
// uncompressed one, or one written with NoDictionary has none. Each reads
// back whole.
func TestDictionary(t *testing.T) {
	big := dictionaryTable()
	small := []testPartition{eventPartition(rand.New(rand.NewPCG(2, 0)), []byte("small"), 50)}
	cases := []struct {
		name     string
		parts    []testPartition
		opts     WriterOptions
		wantDict bool
	}{
		{"zstd", big, WriterOptions{Compression: CompressionZstd, ZstdLevel: 7}, true},
		{"zstd small blocks", big, WriterOptions{Compression: CompressionZstd, BlockSize: 1024}, true},
		{"zstd small file", small, WriterOptions{Compression: CompressionZstd}, false},
		{"zstd NoDictionary", big, WriterOptions{Compression: CompressionZstd, NoDictionary: true}, false},
		{"s2", big, WriterOptions{Compression: CompressionS2}, false},
		{"none", big, WriterOptions{Compression: CompressionNone}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := writeTable(t, tc.parts, tc.opts)
			r := openTable(t, f, NewCache(1<<20))
			defer r.Close()
			checkTable(t, r, tc.parts, tc.opts.Compression)
			if got := r.dict != nil; got != tc.wantDict {
				t.Fatalf("file has a dictionary: %v, want %v", got, tc.wantDict)
			}
			codecs := blockCodecs(t, r, f.data)
			if !tc.wantDict {
				if codecs[compressionZstdDict] != 0 {
					t.Fatalf("blocks by compression %v: some use a dictionary the file does not have", codecs)
				}
				return
			}
			if len(r.dict.content) != dictSampleSize {
				t.Fatalf("dictionary of %d bytes, want %d", len(r.dict.content), dictSampleSize)
			}
			if codecs[CompressionZstd] != 0 || codecs[compressionZstdDict] == 0 {
				t.Fatalf("blocks by compression %v: want every zstd block against the dictionary", codecs)
			}
		})
	}
}

// TestDictionaryDensity checks what the dictionary is for: 16 KiB blocks
// with it take no more room than 32 KiB blocks without it did (version 4's
// default), and clearly less than 16 KiB blocks without it.
func TestDictionaryDensity(t *testing.T) {
	parts := dictionaryTable()
	size := func(opts WriterOptions) int64 {
		_, props := writeTable(t, parts, opts)
		return props.FileBytes
	}
	v4 := size(WriterOptions{Compression: CompressionZstd, ZstdLevel: 7, BlockSize: 32 << 10, NoDictionary: true})
	small := size(WriterOptions{Compression: CompressionZstd, ZstdLevel: 7, BlockSize: 16 << 10, NoDictionary: true})
	dict := size(WriterOptions{Compression: CompressionZstd, ZstdLevel: 7, BlockSize: 16 << 10})
	t.Logf("bytes per event: 32 KiB blocks %.1f, 16 KiB %.1f, 16 KiB with the dictionary %.1f",
		float64(v4)/10400, float64(small)/10400, float64(dict)/10400)
	if dict > v4*115/100 || dict >= small {
		t.Fatalf("16 KiB blocks with the dictionary take %d bytes; 32 KiB without %d, 16 KiB without %d", dict, v4, small)
	}
}

// TestDictionaryNotWrittenUnused checks that a zstd file whose data blocks
// are all too small for zstd (compressed with s2 or stored as they are,
// as one-row partitions' are) does not carry a dictionary none of them
// uses.
func TestDictionaryNotWrittenUnused(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0))
	var parts []testPartition
	for i := 0; i < 2000; i++ {
		p := eventPartition(rng, fmt.Appendf(nil, "timeline-%06d", i), 1)
		parts = append(parts, p)
	}
	f, props := writeTable(t, parts, WriterOptions{Compression: CompressionZstd})
	r := openTable(t, f, NewCache(1<<20))
	defer r.Close()
	checkTable(t, r, parts, CompressionZstd)
	if r.dict != nil || props.DictionaryBytes != 0 {
		t.Fatalf("a file of one-row partitions has a dictionary of %d bytes", props.DictionaryBytes)
	}
	if codecs := blockCodecs(t, r, f.data); codecs[compressionZstdDict] != 0 || codecs[CompressionZstd] != 0 {
		t.Fatalf("blocks by compression %v, want s2 or uncompressed blocks only", codecs)
	}
}
