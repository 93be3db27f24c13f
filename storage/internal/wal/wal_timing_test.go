package wal

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
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
			records := logBytes / (size + recordHeaderSizeV3)
			for range records {
				if err := w.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(records * (size + recordHeaderSizeV3)))
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

// BenchmarkSyncIntoSegment measures what a group commit's fdatasync costs
// in a new (sparse) segment against a reused one (Options.RecycleSegments),
// whose blocks an older generation already wrote: one appender, records of
// 200 KB (about one loadtest/peers batch of 1,000 events), each synced.
// It reports the mean fdatasync in µs (from Options.OnSync) and the
// process's system CPU per record.
//
//	go test ./storage/internal/wal/ -run '^$' -bench SyncIntoSegment -benchtime 1000x
//
// ext4 on the shared 2-core VM, three runs at load 7-10 (2026-11-24,
// s11-wal): new segment 267-273 µs per append, fdatasync 183-191 µs,
// 131-139 µs system CPU; reused 157-168 µs, 110-115 µs, 67-86 µs.
func BenchmarkSyncIntoSegment(b *testing.B) {
	const record = 200 << 10
	const segment = 16 << 20
	for _, reuse := range []bool{false, true} {
		b.Run(fmt.Sprintf("reused=%v", reuse), func(b *testing.B) {
			dir := b.TempDir()
			var syncs atomic.Int64
			var syncNanos atomic.Int64
			counting := atomic.Bool{}
			opts := Options{FS: vfs.Default, Dir: dir, SegmentTargetSize: segment, RecycleSegments: 2,
				OnSync: func(_ int, _ int, took time.Duration) {
					if counting.Load() {
						syncs.Add(1)
						syncNanos.Add(int64(took))
					}
				}}
			w, err := Open(opts, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			rec := make([]byte, record)
			for i := range rec {
				rec[i] = byte(i * 7)
			}
			// Two full segments, released for reuse when reuse is set.
			for range 2 * segment / record {
				if err := w.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := w.Rotate(); err != nil {
				b.Fatal(err)
			}
			if reuse {
				if _, err := w.ReleaseSegmentsBefore(w.CurrentSegment()); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Rotate(); err != nil {
					b.Fatal(err)
				}
			}
			counting.Store(true)
			b.SetBytes(record)
			sysBefore := systemCPU(b)
			b.ResetTimer()
			for range b.N {
				if err := w.Append(rec); err != nil {
					b.Fatal(err)
				}
				if reuse && w.RecycledSegments() == 0 {
					if _, err := w.ReleaseSegmentsBefore(w.CurrentSegment()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(systemCPU(b)-sysBefore)/float64(b.N)/1e3, "sys-µs/op")
			if n := syncs.Load(); n > 0 {
				b.ReportMetric(float64(syncNanos.Load())/float64(n)/1e3, "fdatasync-µs")
			}
		})
	}
}

// systemCPU returns the process's system CPU time so far.
func systemCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Stime.Nano())
}
