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
