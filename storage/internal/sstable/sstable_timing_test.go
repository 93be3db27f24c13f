package sstable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/storage/internal/base"
	"github.com/klauspost/compress/zstd"
)

// Benchmarks. Run with:
//
//	go test ./storage/internal/sstable -run '^$' -bench . -benchmem
//
// BenchmarkWrite reports bytes/event: the file size divided by the number
// of events, for ~200-byte JSON events with TimeUUID-like clustering keys
// (see eventPartition), next to "pebble-like", an estimate of the same data
// in Pebble's table format (prefix-compressed internal keys with an 8-byte
// trailer, restarts every 16 keys, zstd) with its default 4 KiB blocks and
// with our 32 KiB.

const (
	benchPartitions = 20
	benchEvents     = 5000 // per partition
)

func benchTable(seed uint64) []testPartition {
	rng := rand.New(rand.NewPCG(seed, 0))
	parts := make([]testPartition, benchPartitions)
	for i := range parts {
		parts[i] = eventPartition(rng, fmt.Appendf(nil, "%08d|click", 1000+i), benchEvents)
	}
	return parts
}

// rawEventBytes is what the events weigh as raw fields: keys, column,
// value, timestamp, TTL and expiry.
func rawEventBytes(parts []testPartition) int64 {
	var n int64
	for _, p := range parts {
		for i := range p.cells {
			c := &p.cells[i]
			n += int64(len(p.key) + len(c.Clustering) + len(c.Column) + len(c.Value) + 8 + 4 + 8)
		}
	}
	return n
}

func BenchmarkWrite(b *testing.B) {
	parts := benchTable(1)
	events := float64(benchPartitions * benchEvents)
	for _, comp := range allCompressions {
		b.Run(comp.String(), func(b *testing.B) {
			b.SetBytes(rawEventBytes(parts))
			b.ReportAllocs()
			var props Properties
			for b.Loop() {
				_, props = writeTable(b, parts, WriterOptions{Compression: comp})
			}
			b.ReportMetric(float64(props.FileBytes)/events, "bytes/event")
			b.ReportMetric(float64(props.IndexBytes)/events, "index-bytes/event")
		})
	}
	b.Run("zstd-level7", func(b *testing.B) {
		b.SetBytes(rawEventBytes(parts))
		var props Properties
		for b.Loop() {
			_, props = writeTable(b, parts, WriterOptions{Compression: CompressionZstd, ZstdLevel: 7})
		}
		b.ReportMetric(float64(props.FileBytes)/events, "bytes/event")
	})
	for _, blockSize := range []int{4 << 10, 32 << 10} {
		b.Run(fmt.Sprintf("pebble-like-zstd-%dKiB", blockSize>>10), func(b *testing.B) {
			var size int
			for b.Loop() {
				size = pebbleLikeSize(b, parts, blockSize)
			}
			b.ReportMetric(float64(size)/events, "bytes/event")
		})
	}
}

// pebbleLikeSize estimates the data block bytes Pebble would write for the
// same cells with its defaults: key = partition + clustering + column +
// 8-byte trailer, prefix-compressed against the previous key with a
// restart every 16 keys; value = kind, timestamp, TTL and expiry in fixed
// width, then the value; blocks of blockSize (Pebble's default is 4 KiB),
// each zstd-compressed, plus a 5-byte trailer. Index blocks and filters are
// not counted.
func pebbleLikeSize(tb testing.TB, parts []testPartition, blockSize int) int {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	var blk, restarts, prevKey, key, out []byte
	entries, total := 0, 0
	flush := func() {
		for i := 0; i < len(restarts); i += 4 {
			blk = append(blk, restarts[i:i+4]...)
		}
		blk = binary.LittleEndian.AppendUint32(blk, uint32(len(restarts)/4))
		out = enc.EncodeAll(blk, out[:0])
		total += len(out) + 5
		blk, restarts, prevKey, entries = blk[:0], restarts[:0], prevKey[:0], 0
	}
	for _, p := range parts {
		for i := range p.cells {
			c := &p.cells[i]
			key = append(append(append(append(key[:0], p.key...), c.Clustering...), c.Column...), make([]byte, 8)...)
			shared := 0
			if entries%16 == 0 {
				restarts = binary.LittleEndian.AppendUint32(restarts, uint32(len(blk)))
			} else {
				shared = commonPrefix(prevKey, key)
			}
			vlen := 1 + 8 + 4 + 8 + len(c.Value)
			blk = binary.AppendUvarint(blk, uint64(shared))
			blk = binary.AppendUvarint(blk, uint64(len(key)-shared))
			blk = binary.AppendUvarint(blk, uint64(vlen))
			blk = append(blk, key[shared:]...)
			blk = append(blk, byte(c.Kind))
			blk = binary.LittleEndian.AppendUint64(blk, uint64(c.Timestamp))
			blk = binary.LittleEndian.AppendUint32(blk, uint32(c.TTL))
			blk = binary.LittleEndian.AppendUint64(blk, uint64(c.LocalDeletionTime))
			blk = append(blk, c.Value...)
			prevKey = append(prevKey[:0], key...)
			entries++
			if len(blk) >= blockSize {
				flush()
			}
		}
	}
	if entries > 0 {
		flush()
	}
	return total
}

func openBench(b *testing.B, parts []testPartition, comp Compression, cache *Cache) *Reader {
	f, _ := writeTable(b, parts, WriterOptions{Compression: comp})
	return openTable(b, f, cache)
}

// BenchmarkReadLatest50 is the dashboard read: the 50 newest events of a
// partition (clustering DESC, so the first 50 cells).
func BenchmarkReadLatest50(b *testing.B) {
	parts := benchTable(2)
	for _, comp := range allCompressions {
		for _, cached := range []bool{true, false} {
			name := comp.String() + "/cold"
			var cache *Cache
			if cached {
				name = comp.String() + "/cached"
				cache = NewCache(256 << 20)
			}
			b.Run(name, func(b *testing.B) {
				r := openBench(b, parts, comp, cache)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					info, ok := r.Partition(parts[i%len(parts)].key)
					if !ok {
						b.Fatal("partition missing")
					}
					it := r.NewPartitionIter(info, IterOptions{})
					n := 0
					for n < 50 && it.Next() {
						n++
					}
					if n != 50 || it.Err() != nil {
						b.Fatalf("read %d cells: %v", n, it.Err())
					}
					it.Close()
					i++
				}
			})
		}
	}
}

// BenchmarkScanPartition iterates over a whole partition (5,000 events).
func BenchmarkScanPartition(b *testing.B) {
	parts := benchTable(3)
	for _, comp := range allCompressions {
		for _, cached := range []bool{true, false} {
			name := comp.String() + "/cold"
			var cache *Cache
			if cached {
				name = comp.String() + "/cached"
				cache = NewCache(256 << 20)
			}
			b.Run(name, func(b *testing.B) {
				r := openBench(b, parts, comp, cache)
				info, _ := r.Partition(parts[0].key)
				b.SetBytes(rawEventBytes(parts[:1]))
				b.ReportAllocs()
				for b.Loop() {
					it := r.NewPartitionIter(info, IterOptions{})
					n := 0
					for it.Next() {
						n++
					}
					if n != benchEvents || it.Err() != nil {
						b.Fatalf("read %d cells: %v", n, it.Err())
					}
					it.Close()
				}
			})
		}
	}
}

// BenchmarkScanner is compaction's read: the whole file in order.
func BenchmarkScanner(b *testing.B) {
	parts := benchTable(4)
	r := openBench(b, parts, CompressionZstd, nil)
	b.SetBytes(rawEventBytes(parts))
	b.ReportAllocs()
	for b.Loop() {
		s := r.NewScanner()
		n := 0
		for s.NextPartition() {
			for s.NextCell() {
				n++
			}
		}
		if n != benchPartitions*benchEvents || s.Err() != nil {
			b.Fatalf("scanned %d cells: %v", n, s.Err())
		}
	}
}

// BenchmarkPartitionLookup is the bloom check and index search in a file
// of 100,000 one-row partitions, with a cache large enough for the whole
// index (version 4 reads index pages through it) and without one.
// BenchmarkPointRead also reads the partition's row, as a timeline read
// of one user does.
func BenchmarkPartitionLookup(b *testing.B) {
	benchPointReads(b, false)
}

func BenchmarkPointRead(b *testing.B) {
	benchPointReads(b, true)
}

// oneRowPartitions is n timeline-like partitions of one row each.
func oneRowPartitions(n int) []testPartition {
	rng := rand.New(rand.NewPCG(5, 0))
	parts := make([]testPartition, n)
	for i := range parts {
		parts[i] = testPartition{key: fmt.Appendf(nil, "user-%09d", i*7), del: liveDel(),
			cells: []base.Cell{{Clustering: timeUUIDKey(uint64(i), 0), Column: []byte("data"), Kind: base.KindLive, Timestamp: 1, LocalDeletionTime: base.NoDeletionTime, Value: randomValue(rng, 10)}}}
	}
	return parts
}

// BenchmarkWriteOneRowPartitions is a flush or compaction output of the
// fan-out: 100,000 one-row partitions, per partition.
func BenchmarkWriteOneRowPartitions(b *testing.B) {
	parts := oneRowPartitions(100000)
	for _, comp := range []Compression{CompressionS2, CompressionZstd} {
		b.Run(comp.String(), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.MustProcess(b.Fatal)
			for b.Loop() {
				writeTable(b, parts, WriterOptions{Compression: comp})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(parts)), "ns/partition")
			b.ReportMetric(float64(cputime.MustProcess(b.Fatal)-cpu)/float64(b.N*len(parts)), "cpu-ns/partition")
		})
	}
}

// BenchmarkScanOneRowPartitions is a compaction's read of such a file.
func BenchmarkScanOneRowPartitions(b *testing.B) {
	parts := oneRowPartitions(100000)
	r := openBench(b, parts, CompressionS2, NewCache(32<<20))
	b.ReportAllocs()
	cpu := cputime.MustProcess(b.Fatal)
	for b.Loop() {
		s := r.NewScanner()
		n := 0
		for s.NextPartition() {
			for s.NextCell() {
				n++
			}
		}
		if n != len(parts) || s.Err() != nil {
			b.Fatalf("scanned %d cells: %v", n, s.Err())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(parts)), "ns/partition")
	b.ReportMetric(float64(cputime.MustProcess(b.Fatal)-cpu)/float64(b.N*len(parts)), "cpu-ns/partition")
}

func benchPointReads(b *testing.B, readRow bool) {
	parts := oneRowPartitions(100000)
	for _, cached := range []bool{true, false} {
		name := "nocache"
		var cache *Cache
		if cached {
			name, cache = "cached", NewCache(256<<20)
		}
		b.Run(name, func(b *testing.B) {
			r := openBench(b, parts, CompressionZstd, cache)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := parts[(i*7919)%len(parts)].key
				if !r.MayContain(k) {
					b.Fatal("bloom false negative")
				}
				info, ok := r.Partition(k)
				if !ok {
					b.Fatal("partition missing")
				}
				if readRow {
					it := r.NewPartitionIter(info, IterOptions{})
					if !it.Next() || it.Err() != nil {
						b.Fatalf("read nothing: %v", it.Err())
					}
					it.Close()
				}
				i++
			}
		})
	}
}

// BenchmarkDecodeDataBlock measures what a block cache miss costs after
// the read itself: checksum, decompression and decoding of one block of
// JSON events, with plain and with shaped values: "v4" is a 32 KiB block
// compressed on its own at level 7 (format version 4's default), "dict" a
// 16 KiB block compressed against a dictionary cut from other blocks of
// the same partition (version 5's default). Decompressing and decoding
// per block and per cell are both reported: a cold slice of a few rows
// pays for whole blocks.
func BenchmarkDecodeDataBlock(b *testing.B) {
	p := eventPartition(rand.New(rand.NewPCG(6, 0)), []byte("p"), 1000)
	for _, shaped := range []bool{false, true} {
		for _, dict := range []bool{false, true} {
			name := "plain"
			if shaped {
				name = "shaped"
			}
			size := defaultBlockSize
			if dict {
				name += "/dict-16KiB"
			} else {
				name += "/v4-32KiB"
				size = 32 << 10
			}
			b.Run(name, func(b *testing.B) {
				// The block: cells from the middle of the partition;
				// the dictionary: the first dictSampleSize bytes of
				// the blocks before them.
				var raws [][]byte
				var splits []int
				var cells int
				bb := blockBuilder{shapeValues: shaped}
				for i := range p.cells {
					c := &p.cells[i]
					if !bb.empty() && bb.size()+cellSize(c, true) > size {
						var raw []byte
						cells = bb.cells
						raw, _, splits = bb.finish(nil)
						raws = append(raws, raw)
						bb.reset()
					}
					bb.add(c, false)
				}
				var hist []byte
				for _, r := range raws[:len(raws)-1] {
					hist = append(hist, r...)
				}
				raw := raws[len(raws)-1]
				comp, err := newCompressor(CompressionZstd, 7)
				if err != nil {
					b.Fatal(err)
				}
				var fd *fileDict
				if dict {
					if len(hist) < dictSampleSize {
						b.Fatalf("%d bytes of blocks before the measured one, want %d", len(hist), dictSampleSize)
					}
					if fd, err = decodeDictionary(hist[:dictSampleSize]); err != nil {
						b.Fatal(err)
					}
					if err := comp.setDict(fd.content); err != nil {
						b.Fatal(err)
					}
				}
				frame, _ := comp.appendBlockFrame(nil, raw, CompressionZstd, splits, dict)
				var d decompressor
				b.Run("decompress", func(b *testing.B) {
					b.SetBytes(int64(len(raw)))
					b.ReportAllocs()
					defer reportCPUPerOp(b)()
					// One buffer reused, as block reads reuse
					// released blocks' arena buffers, with the
					// slack they are allocated with.
					dst := make([]byte, 0, len(raw)+zstdOutputSlack)
					for b.Loop() {
						if _, err := d.decodeDataFrame(frame, uint64(len(raw)), dst, fd); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(frame))/float64(cells), "bytes/cell")
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cells), "ns/cell")
				})
				b.Run("decode", func(b *testing.B) {
					b.SetBytes(int64(len(raw)))
					b.ReportAllocs()
					defer reportCPUPerOp(b)()
					for b.Loop() {
						if _, _, err := decodeBlock(raw, formatVersion2); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cells), "ns/cell")
				})
			})
		}
	}
}

// BenchmarkWriteSmallSSTables writes many small zstd SSTables, as flushes
// of small memtables and compactions of many small inputs do: the cost per
// Writer beyond its data (encoder, buffers) shows.
func BenchmarkWriteSmallSSTables(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	parts := randomTable(rng, 4, 20)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		writeTable(b, parts, WriterOptions{Compression: CompressionZstd, ZstdLevel: 7})
	}
}

// reportCPUPerOp starts counting processCPU and returns what reports it
// per op as "cpu-ns/op":
//
//	defer reportCPUPerOp(b)()
func reportCPUPerOp(b *testing.B) func() {
	cpu0 := cputime.MustProcess(b.Fatal)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cputime.MustProcess(b.Fatal)-cpu0)/float64(b.N), "cpu-ns/op")
		}
	}
}
