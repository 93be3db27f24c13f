package sstable

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eventide/eventide/storage/internal/base"
)

const corruptPath = "/data/corrupt-000042.sst"

// smallTable is a table with every structure present: several partitions,
// deletions, all kinds, more than one block per partition.
func smallTable(rng *rand.Rand) []testPartition {
	parts := randomTable(rng, 4, 12)
	parts[0].del = randomDeletions(rng)
	return parts
}

// readAll opens a file and reads everything in it, returning the first
// error: Open, Check, a full scan and bounded iteration of each partition.
// On success it also checks that what was read is exactly what was
// written, so a corruption is either reported or harmless.
func readAll(t *testing.T, data []byte, parts []testPartition) error {
	r, err := Open(&memFile{data: data}, corruptPath, 7, NewCache(1<<20))
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Check(); err != nil {
		return err
	}
	s := r.NewScanner()
	i := 0
	for s.NextPartition() {
		var got []base.Cell
		for s.NextCell() {
			got = append(got, s.Cell().Clone())
		}
		if s.Err() != nil {
			break
		}
		if i >= len(parts) {
			t.Fatalf("corrupted file yielded an extra partition %x silently", s.Partition().Key)
		}
		if d := diffCells(got, parts[i].cells); d != "" || !deletionsEqual(s.Partition().Deletions, parts[i].del) {
			t.Fatalf("corrupted file yielded wrong data silently: partition %x: %s", parts[i].key, d)
		}
		info, ok := r.Partition(parts[i].key)
		if !ok {
			t.Fatalf("corrupted file lost partition %x silently", parts[i].key)
		}
		it := r.NewPartitionIter(info, IterOptions{Reverse: true})
		for it.Next() {
		}
		if it.Err() != nil {
			return it.Err()
		}
		i++
	}
	if s.Err() != nil {
		return s.Err()
	}
	if i != len(parts) {
		t.Fatalf("corrupted file yielded %d partitions silently, want %d", i, len(parts))
	}
	return nil
}

func checkCorruptionError(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("%s: got error %v, want one wrapping base.ErrCorruption", what, err)
	}
	if !strings.Contains(err.Error(), corruptPath) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("%s: error %q does not name the file and the offset", what, err)
	}
}

// TestCorruptionEveryByte flips every byte of a small table, one at a time:
// every flip must be reported as corruption naming the file and offset,
// since checksums cover every byte.
func TestCorruptionEveryByte(t *testing.T) {
	for _, comp := range allCompressions {
		t.Run(comp.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(comp)))
			parts := smallTable(rng)
			f, _ := writeTable(t, parts, WriterOptions{Compression: comp, BlockSize: 256})
			if err := readAll(t, f.data, parts); err != nil {
				t.Fatalf("intact file: %v", err)
			}
			for i := range f.data {
				for _, mask := range []byte{0xff, 1 << (i % 8)} {
					data := append([]byte(nil), f.data...)
					data[i] ^= mask
					err := readAll(t, data, parts)
					if err == nil {
						t.Fatalf("flipping byte %d of %d with %#02x went unnoticed", i, len(data), mask)
					}
					checkCorruptionError(t, err, "flipped byte")
				}
			}
		})
	}
}

func TestCorruptionTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 0))
	parts := smallTable(rng)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, BlockSize: 256})
	for n := 0; n < len(f.data); n++ {
		err := readAll(t, f.data[:n], parts)
		if err == nil {
			t.Fatalf("truncating to %d of %d bytes went unnoticed", n, len(f.data))
		}
		checkCorruptionError(t, err, "truncated file")
	}
	// Garbage appended moves the footer.
	err := readAll(t, append(append([]byte(nil), f.data...), 0, 0, 0), parts)
	if err == nil {
		t.Fatal("appended bytes went unnoticed")
	}
	checkCorruptionError(t, err, "appended bytes")
}

// TestCorruptionRandom damages a few random bytes at once.
func TestCorruptionRandom(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 13))
	for _, comp := range allCompressions {
		parts := smallTable(rng)
		f, _ := writeTable(t, parts, WriterOptions{Compression: comp, BlockSize: 512})
		for trial := 0; trial < 300; trial++ {
			data := append([]byte(nil), f.data...)
			for k := 1 + rng.IntN(4); k > 0; k-- {
				data[rng.IntN(len(data))] = byte(rng.Uint32())
			}
			if err := readAll(t, data, parts); err != nil {
				checkCorruptionError(t, err, "random damage")
			}
		}
	}
}

// readAllLoose reads everything like readAll but cannot demand the
// original data back: it is for damage that a checksum cannot see.
func readAllLoose(data []byte) error {
	r, err := Open(&memFile{data: data}, corruptPath, 7, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Check(); err != nil {
		return err
	}
	s := r.NewScanner()
	for s.NextPartition() {
		info, ok := r.Partition(s.Partition().Key)
		if !ok {
			return errors.New("scanned partition not found")
		}
		for s.NextCell() {
		}
		for _, reverse := range []bool{false, true} {
			it := r.NewPartitionIter(info, IterOptions{Reverse: reverse, Start: base.Bound{Key: info.MinClustering, Inclusive: false}})
			for it.Next() {
			}
			if it.Err() != nil {
				return it.Err()
			}
		}
	}
	return s.Err()
}

// TestCorruptionBehindChecksum damages the decompressed contents of every
// block and meta block and then fixes the checksum, as a bug or a
// malicious file would: the decoders must reject or survive it, never
// panic, and report only corruption errors.
func TestCorruptionBehindChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 0))
	parts := smallTable(rng)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionNone, BlockSize: 256})
	r := openTable(t, f, nil)
	type frame struct{ off, n uint64 }
	var frames []frame
	for j := range r.top.pages {
		pg, err := r.page(j, fromDisk)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < pg.blocks.len(); i++ {
			h := pg.blocks.handle(i)
			frames = append(frames, frame{pg.blocks.fileOffs[i], h.storedLen})
		}
		if ref := r.top.pages[j]; ref.resident == nil {
			frames = append(frames, frame{ref.offset(), ref.storedLen})
		}
	}
	ft, _, err := decodeFooter(f.data[len(f.data)-footerLen:], uint64(len(f.data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range ft.handles() {
		frames = append(frames, frame{h.offset, h.storedLen})
	}
	rejected, survived := 0, 0
	for _, fr := range frames {
		for i := fr.off; i < fr.off+fr.n; i++ {
			for _, mask := range []byte{0xff, 0x01, 0x80} {
				data := append([]byte(nil), f.data...)
				data[i] ^= mask
				payload := data[fr.off : fr.off+fr.n]
				c := Compression(data[fr.off+fr.n])
				sum := blockChecksum(payload, c)
				data[fr.off+fr.n+1], data[fr.off+fr.n+2], data[fr.off+fr.n+3], data[fr.off+fr.n+4] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
				if err := readAllLoose(data); err != nil {
					checkCorruptionError(t, err, "damage behind the checksum")
					rejected++
				} else {
					survived++
				}
			}
		}
	}
	t.Logf("damage behind checksums: %d rejected, %d decoded to other valid data", rejected, survived)
	if rejected == 0 {
		t.Fatal("no damage was rejected: the decoders validate nothing")
	}
}

// dictTable is a table with more than dictSampleSize bytes of data
// blocks, so that a zstd file of it has a dictionary, in small blocks.
func dictTable(rng *rand.Rand) []testPartition {
	parts := smallTable(rng)
	return append(parts, eventPartition(rng, []byte("zz|events"), 300))
}

// TestCorruptionDictionary flips every byte of a file's dictionary frame
// and of its footer handle, and swaps the compression byte of every data
// block between 1 and 3 (zstd with and without the dictionary): each must
// be reported as corruption naming the file and the offset.
func TestCorruptionDictionary(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 0))
	parts := dictTable(rng)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, BlockSize: 1024})
	if err := readAll(t, f.data, parts); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	ft, _, err := decodeFooter(f.data[len(f.data)-footerLen:], uint64(len(f.data)))
	if err != nil {
		t.Fatal(err)
	}
	dh := ft.dictionary()
	if dh == (metaHandle{}) {
		t.Fatal("the file has no dictionary")
	}
	flip := func(i uint64, what string) {
		t.Helper()
		for _, mask := range []byte{0xff, 1 << (i % 8)} {
			data := append([]byte(nil), f.data...)
			data[i] ^= mask
			err := readAll(t, data, parts)
			if err == nil {
				t.Fatalf("flipping byte %d (%s) with %#02x went unnoticed", i, what, mask)
			}
			checkCorruptionError(t, err, what)
		}
	}
	for i := dh.offset; i < dh.end(); i++ {
		flip(i, "dictionary frame")
	}
	handleAt := uint64(len(f.data)-footerLen) + 24
	for i := handleAt; i < handleAt+24; i++ {
		flip(i, "dictionary handle")
	}
	swapped := 0
	for i, tr := range dataBlockTrailers(t, f) {
		c := Compression(f.data[tr.at])
		if c != CompressionZstd && c != compressionZstdDict {
			continue
		}
		// With and without fixing the checksum.
		for _, fix := range []bool{false, true} {
			data := append([]byte(nil), f.data...)
			data[tr.at] = byte(CompressionZstd + compressionZstdDict - c)
			if fix {
				tr.setCompression(data, Compression(data[tr.at]))
			}
			err := readAll(t, data, parts)
			if err == nil {
				t.Fatalf("block %d: compression %v read as %v (checksum fixed: %v) went unnoticed", i, c, Compression(data[tr.at]), fix)
			}
			checkCorruptionError(t, err, "swapped compression")
			swapped++
		}
	}
	if swapped == 0 {
		t.Fatal("no zstd data block to swap")
	}
}

// TestCorruptionDictionaryBehindChecksum damages the dictionary's bytes
// and fixes its checksum, and marks blocks of a file without a dictionary
// as compressed against one: the reader must reject or survive it (a
// damaged dictionary can decode to other valid bytes), never panic, and
// report only corruption errors.
func TestCorruptionDictionaryBehindChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 0))
	parts := dictTable(rng)
	f, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, BlockSize: 1024})
	ft, _, err := decodeFooter(f.data[len(f.data)-footerLen:], uint64(len(f.data)))
	if err != nil {
		t.Fatal(err)
	}
	// The dictionary meta block is zstd-compressed: damage its payload
	// and fix the checksum.
	dh := ft.dictionary()
	rejected := 0
	for i := dh.offset; i < dh.offset+dh.storedLen; i += 7 {
		data := append([]byte(nil), f.data...)
		data[i] ^= 0x5a
		payload := data[dh.offset : dh.offset+dh.storedLen]
		sum := blockChecksum(payload, Compression(data[dh.offset+dh.storedLen]))
		at := dh.offset + dh.storedLen
		data[at+1], data[at+2], data[at+3], data[at+4] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
		if err := readAllLoose(data); err != nil {
			checkCorruptionError(t, err, "damaged dictionary")
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatal("no damaged dictionary was rejected")
	}
	// A file without a dictionary whose zstd blocks claim one.
	nf, _ := writeTable(t, parts, WriterOptions{Compression: CompressionZstd, BlockSize: 1024, NoDictionary: true})
	claimed := 0
	for i, tr := range dataBlockTrailers(t, nf) {
		if Compression(nf.data[tr.at]) != CompressionZstd {
			continue
		}
		data := append([]byte(nil), nf.data...)
		tr.setCompression(data, compressionZstdDict)
		err := readAllLoose(data)
		if err == nil {
			t.Fatalf("block %d claims a dictionary the file does not have, unnoticed", i)
		}
		checkCorruptionError(t, err, "claimed dictionary")
		claimed++
	}
	if claimed == 0 {
		t.Fatal("no zstd data block in the file without a dictionary")
	}
}

// blockTrailer locates one data block's trailer in a file: its stored
// payload starts at start; the compression byte is at at, its checksum
// in the four bytes after.
type blockTrailer struct{ start, at uint64 }

// dataBlockTrailers lists the trailers of f's data blocks, in file order.
func dataBlockTrailers(t *testing.T, f *memFile) []blockTrailer {
	t.Helper()
	r := openTable(t, f, nil)
	defer r.Close()
	var trailers []blockTrailer
	for j := range r.top.pages {
		pg, err := r.page(j, fromDisk)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pg.blocks.fileOffs {
			start := pg.blocks.fileOffs[i]
			trailers = append(trailers, blockTrailer{start: start, at: start + pg.blocks.handle(i).storedLen})
		}
	}
	return trailers
}

// setCompression makes the block at tr in data claim compression c, with a
// checksum that matches the claim.
func (tr blockTrailer) setCompression(data []byte, c Compression) {
	data[tr.at] = byte(c)
	sum := blockChecksum(data[tr.start:tr.at], c)
	data[tr.at+1], data[tr.at+2], data[tr.at+3], data[tr.at+4] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
}
