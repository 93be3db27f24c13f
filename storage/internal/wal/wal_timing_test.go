package wal

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// BenchmarkAppend measures group commit on the real filesystem of b.TempDir:
// records/s and MB/s for the throughput, fsyncs/s and records/fsync for how
// well concurrent appenders share fsyncs.
//
//	go test ./storage/internal/wal/ -run '^$' -bench Append -benchtime 2s
//
// Format version 2 (preallocated segments, fdatasync per group commit)
// against version 1, mode=always, records/s, ext4 on a shared 2-core VM
// (two alternating runs each; this machine's fsync latency varied up to 3x
// between runs, so only large differences mean anything):
//
//	record  appenders  version 1        version 2
//	128     1          6,369 / 6,280    8,462 / 9,313
//	128     16         30,987 / 48,589  44,527 / 66,234
//	128     256        645k / 571k      512k / 670k
//	4096    1          2,340 / 5,123    5,226 / 5,832
//	4096    16         37,177 / 38,162  41,933 / 41,340
//	4096    256        128k / 132k      132k / 164k
func BenchmarkAppend(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, mode := range []SyncMode{SyncAlways, SyncPeriodic} {
		for _, size := range []int{128, 4096} {
			// parallelism 0 means one appender in a plain loop.
			for _, parallelism := range []int{0, 8, 128} {
				appenders := max(1, parallelism*procs)
				name := fmt.Sprintf("mode=%s/record=%d/appenders=%d", mode, size, appenders)
				b.Run(name, func(b *testing.B) { benchmarkAppend(b, mode, size, parallelism) })
			}
		}
	}
}

// BenchmarkAppendStaged is BenchmarkAppend's SyncAlways mode through
// AppendStaged (DB.Apply's path), whose caller writes the pending records
// itself: one appender, and many sharing the write and the fsync.
//
//	go test ./storage/internal/wal/ -run '^$' -bench AppendStaged
func BenchmarkAppendStaged(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, parallelism := range []int{0, 8, 128} {
		appenders := max(1, parallelism*procs)
		b.Run(fmt.Sprintf("record=4096/appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppendWith(b, SyncAlways, 4096, parallelism, func(w *Writer, rec []byte) error {
				wait, err := w.AppendStaged(rec)
				if err != nil {
					return err
				}
				return wait()
			})
		})
	}
}

func benchmarkAppend(b *testing.B, mode SyncMode, size, parallelism int) {
	benchmarkAppendWith(b, mode, size, parallelism, (*Writer).Append)
}

func benchmarkAppendWith(b *testing.B, mode SyncMode, size, parallelism int, appendRec func(w *Writer, rec []byte) error) {
	var syncs atomic.Int64
	w, err := Open(Options{FS: vfs.Default, Dir: b.TempDir(), Mode: mode,
		OnSync: func(int, int, time.Duration) { syncs.Add(1) }}, 1)
	if err != nil {
		b.Fatal(err)
	}
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte(i)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	if parallelism == 0 {
		for i := 0; i < b.N; i++ {
			if err := appendRec(w, rec); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := appendRec(w, rec); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	elapsed := b.Elapsed().Seconds()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed, "records/s")
	b.ReportMetric(float64(syncs.Load())/elapsed, "fsyncs/s")
	if syncs.Load() > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs.Load()), "records/fsync")
	}
}

// BenchmarkReplay measures decoding a log from the page cache.
//
//	go test ./storage/internal/wal/ -run '^$' -bench Replay
func BenchmarkReplay(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("record=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			w, err := Open(Options{FS: vfs.Default, Dir: dir, Mode: SyncPeriodic, SegmentTargetSize: 8 << 20}, 1)
			if err != nil {
				b.Fatal(err)
			}
			rec := make([]byte, size)
			const logBytes = 32 << 20
			records := logBytes / (size + recordHeaderSize)
			for range records {
				if err := w.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(records * (size + recordHeaderSize)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := Replay(vfs.Default, dir, 1, func(uint64, int64, []byte) error { return nil })
				if err != nil || res.Records != records {
					b.Fatalf("replayed %d records, want %d: %v", res.Records, records, err)
				}
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
