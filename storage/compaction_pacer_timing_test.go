package storage

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/eventide/eventide/internal/cputime"
)

// BenchmarkPacedMerge runs the all-in-one's second-tier merge of the
// active time window (four S2 SSTables of ~5.3 MB into one of ~21 MB, in
// a TimeWindow table, as a background compaction) unlimited and under
// Options.CompactionThroughput, and reports its wall time (merge-ms), its
// CPU time (cpu-ms: the whole process's, which does nothing else) and
// the share of a core it took while it ran (cores). Run with:
//
//	go test ./storage -run '^$' -bench PacedMerge -benchtime 1x
func BenchmarkPacedMerge(b *testing.B) {
	src := b.TempDir()
	clock := &fakeClock{now: time.Date(2026, 11, 24, 12, 30, 0, 0, time.UTC)}
	inBytes := writeMergeInputs(b, src, clock, 4, 5_300_000)
	for _, limit := range []int64{0, 16 << 20, 8 << 20} {
		b.Run("limit="+strconv.FormatInt(limit>>20, 10)+"MiB", func(b *testing.B) {
			var wall, cpu time.Duration
			var outBytes int64
			for b.Loop() {
				dir := b.TempDir()
				copyDir(b, src, dir)
				opts := DefaultOptions()
				opts.Clock = clock
				opts.CompactionThroughput = limit
				done := make(chan struct{}, 1)
				opts.Logger = slog.New(compactedHandler{done})
				cpu0 := int64(cputime.MustProcess(b.Fatal))
				start := time.Now()
				db, err := Open(dir, opts) // Open schedules the merge
				if err != nil {
					b.Fatal(err)
				}
				<-done
				wall += time.Since(start)
				cpu += time.Duration(int64(cputime.MustProcess(b.Fatal)) - cpu0)
				outBytes = db.Metrics().CompactionWritten
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(wall.Seconds()*1000/n, "merge-ms")
			b.ReportMetric(cpu.Seconds()*1000/n, "cpu-ms")
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
			b.ReportMetric(float64(inBytes)/1e6, "in-MB")
			b.ReportMetric(float64(outBytes)/1e6, "out-MB")
		})
	}
}

// writeMergeInputs writes n flushes of about size bytes each of events
// (20 partitions, JSON values, newest first) into a TimeWindow table
// "events" in dir, all in the window of clock's now, with automatic
// compaction off, and returns their bytes.
func writeMergeInputs(b *testing.B, dir string, clock *fakeClock, n int, size int64) int64 {
	b.Helper()
	opts := DefaultOptions()
	opts.Clock = clock
	opts.DisableAutoCompaction = true
	opts.WALSyncMode = WALPeriodic
	opts.MemtableSize = 1 << 30
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "events", Compaction: TimeWindow}); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(12, 12))
	now := clock.Now().UnixMicro()
	seq := 0
	var batch Batch
	var total int64
	for range n {
		before := total
		for total-before < size {
			for range 2000 {
				pk := []byte("24111212|type" + strconv.Itoa(seq%20))
				batch.Put("events", pk, benchDeleteKey(seq), []byte("data"), benchEventJSON(rng, seq), now)
				seq++
			}
			if err := db.Apply(context.Background(), &batch); err != nil {
				b.Fatal(err)
			}
			batch.Reset()
			// Estimate the flushed size from the memtable's: the
			// S2 SSTable holds about 2/9 of it.
			if mem := db.Metrics().MemtableBytes; mem*2/9 >= size {
				break
			}
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
		m := db.Metrics()
		total = m.Tables[0].Bytes
	}
	return total
}

func copyDir(b *testing.B, src, dst string) {
	b.Helper()
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if fi.Name() == lockFileName {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		b.Fatal(err)
	}
}

// compactedHandler signals done at the engine's "compacted" log line, so
// the benchmark waits for the merge without polling (whose wake-ups
// would count in its CPU time).
type compactedHandler struct{ done chan<- struct{} }

func (h compactedHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h compactedHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h compactedHandler) WithGroup(string) slog.Handler            { return h }
func (h compactedHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "compacted" {
		select {
		case h.done <- struct{}{}:
		default:
		}
	}
	return nil
}
