package storage

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventide/eventide/storage/vfs"
)

// memoryTestValue is the value of (partition, clustering), so a reader can
// check every cell it gets without knowing what was written when.
func memoryTestValue(partition, clustering []byte) []byte {
	return fmt.Appendf(nil, "value of %s/%s, padded to make the memtable grow %0100d", partition, clustering, 0)
}

func putMemoryTestRows(b *Batch, partition string, from, n int) {
	for i := from; i < from+n; i++ {
		ck := fmt.Appendf(nil, "ck%08d", i)
		b.Put("t", []byte(partition), ck, []byte("v"), memoryTestValue([]byte(partition), ck), int64(i+1))
	}
}

// waitForMappedAtMost waits until the memtables' mapped arena is at most
// limit bytes, or fails after a deadline. It does not run the garbage
// collector: a memtable is unmapped (on a goroutine of its own) as soon as
// the last version holding it is dropped, without waiting for a
// collection. Tests calling it turn the collector off (noGC), so that
// the memtable's fallback, a cleanup once it is unreachable, cannot do
// the unmapping instead.
func waitForMappedAtMost(t *testing.T, db *DB, limit int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := db.Metrics().MemtableMappedBytes
		if got <= limit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("memtable mapped bytes: got %d, want at most %d", got, limit)
		}
		runtime.Gosched()
	}
}

// noGC turns the garbage collector off for the rest of the test; an
// explicit runtime.GC still runs.
func noGC(t *testing.T) {
	old := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(old) })
}

// TestFlushedMemtableArenaReleased checks that the memtable arena lives
// outside the Go heap, is counted in Metrics, and is given back as soon as
// a flush has written it out, if no read holds it.
func TestFlushedMemtableArenaReleased(t *testing.T) {
	noGC(t)
	db := openTestDB(t, &fakeClock{now: time.Unix(1_800_000_000, 0)}, TableDef{Name: "t"})
	empty := db.Metrics().MemtableMappedBytes
	for i := range 20 {
		apply(t, db, func(b *Batch) { putMemoryTestRows(b, fmt.Sprintf("p%d", i), 0, 500) })
	}
	m := db.Metrics()
	if m.MemtableMappedBytes < m.MemtableBytes || m.MemtableBytes < 1<<20 {
		t.Fatalf("memtable holds %d bytes in %d mapped, want over 1 MiB in at least as many mapped", m.MemtableBytes, m.MemtableMappedBytes)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForMappedAtMost(t, db, empty)
	rows := readMemoryTestRows(t, db, "p7")
	if len(rows) != 500 || !bytes.Equal(rows[499].Cells[0].Value, memoryTestValue([]byte("p7"), rows[499].Clustering)) {
		t.Fatalf("after the flush, partition p7 reads %d rows, want 500 with their values", len(rows))
	}
}

func readMemoryTestRows(t *testing.T, db *DB, partition string) []Row {
	t.Helper()
	it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte(partition)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var rows []Row
	for it.Next() {
		r := it.Row()
		c := r.Cells[0]
		c.Value = bytes.Clone(c.Value)
		rows = append(rows, Row{Clustering: bytes.Clone(r.Clustering), Cells: []Cell{c}})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestRowFromMemtableValidAcrossFlush checks the lifetime invariant of
// the memtable arena: a row read from a memtable stays valid until Next or
// Close, however many flushes and collections happen meanwhile, and the
// arena is unmapped by Close.
func TestRowFromMemtableValidAcrossFlush(t *testing.T) {
	noGC(t)
	db := openTestDB(t, &fakeClock{now: time.Unix(1_800_000_000, 0)}, TableDef{Name: "t"})
	empty := db.Metrics().MemtableMappedBytes
	apply(t, db, func(b *Batch) { putMemoryTestRows(b, "p", 0, 3000) })
	it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	check := func() {
		t.Helper()
		r := it.Row()
		want := fmt.Sprintf("ck%08d", n)
		if string(r.Clustering) != want || !bytes.Equal(r.Cells[0].Value, memoryTestValue([]byte("p"), r.Clustering)) {
			t.Fatalf("row %d: got %q = %q, want %q and its value", n, r.Clustering, r.Cells[0].Value, want)
		}
	}
	if !it.Next() {
		t.Fatal(it.Err())
	}
	check()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runtime.GC()
	}
	if db.Metrics().MemtableMappedBytes <= empty {
		t.Fatal("the flushed memtable was unmapped while a read held it")
	}
	check()
	for it.Next() {
		n++
		check()
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if n != 2999 {
		t.Fatalf("read %d rows, want 3000", n+1)
	}
	waitForMappedAtMost(t, db, empty)
}

// TestReadsDuringFlushAndRelease reads while a writer fills small
// memtables that are flushed, compacted and unmapped under the readers;
// every cell read must carry its own value. Run it with -race.
func TestReadsDuringFlushAndRelease(t *testing.T) {
	opts := DefaultOptions()
	opts.Clock = &fakeClock{now: time.Unix(1_800_000_000, 0)}
	opts.MemtableSize = 128 << 10
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable(TableDef{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	const partitions, rounds, perRound = 8, 60, 40
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				p := fmt.Appendf(nil, "p%d", (i+r)%partitions)
				it, err := db.Slice(context.Background(), SliceQuery{Table: "t", Partition: p, Reverse: i%2 == 1, Limit: 200})
				if err != nil {
					errs <- err
					return
				}
				for it.Next() {
					row := it.Row()
					if got, want := row.Cells[0].Value, memoryTestValue(p, row.Clustering); !bytes.Equal(got, want) {
						it.Close()
						errs <- fmt.Errorf("%s/%s: read %q, want %q", p, row.Clustering, got, want)
						return
					}
				}
				if err := it.Close(); err != nil {
					errs <- err
					return
				}
				if i%16 == 0 {
					runtime.GC() // let unreachable memtables be unmapped now
				}
			}
		}()
	}
	for round := range rounds {
		var b Batch
		for p := range partitions {
			putMemoryTestRows(&b, fmt.Sprintf("p%d", p), round*perRound, perRound)
		}
		if err := db.Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if round%10 == 9 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := db.Metrics(); m.Flushes < 6 {
		t.Fatalf("%d flushes, want at least 6", m.Flushes)
	}
}

// TestMemtableUsage: DB.MemtableUsage gives what Metrics gives for the
// memtables (bytes held and frozen count): nothing on an empty store,
// bytes and no frozen memtable after a write, nothing after a flush.
func TestMemtableUsage(t *testing.T) {
	db := openTestDB(t, &fakeClock{now: time.Unix(1_800_000_000, 0)}, TableDef{Name: "t"})
	check := func(when string, wantBytes bool) {
		t.Helper()
		bytes, frozen := db.MemtableUsage()
		m := db.Metrics()
		if bytes != m.MemtableBytes || frozen != m.FrozenMemtables {
			t.Fatalf("%s: MemtableUsage %d bytes, %d frozen; Metrics %d, %d", when, bytes, frozen, m.MemtableBytes, m.FrozenMemtables)
		}
		if frozen != 0 || (bytes > 0) != wantBytes {
			t.Fatalf("%s: %d bytes, %d frozen; want none frozen, bytes held %v", when, bytes, frozen, wantBytes)
		}
	}
	check("empty", false)
	apply(t, db, func(b *Batch) {
		for i := range 100 {
			b.Put("t", []byte("p"), fmt.Appendf(nil, "k%03d", i), []byte("c"), []byte("v"), int64(100+i))
		}
	})
	check("after a write", true)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("after the flush", false)
}

// sstableHoldFS holds every SSTable's creation until release is closed,
// so a frozen memtable stays frozen.
type sstableHoldFS struct {
	vfs.FS
	release chan struct{}
}

func (h *sstableHoldFS) Create(name string) (vfs.File, error) {
	if strings.Contains(name, ".sst") {
		<-h.release
	}
	return h.FS.Create(name)
}

// TestMemtableUsageChange: the channel DB.MemtableUsageChange hands out
// with the figures stays open while nothing can have shrunk the
// memtables (a flush held, a write into the mutable memtable), is closed
// when the flush drops the frozen memtable, and by Close: what lets the
// fan-out wait for room without polling.
func TestMemtableUsageChange(t *testing.T) {
	fs := &sstableHoldFS{FS: vfs.Default, release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(fs.release) })
	db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) { o.FS = fs }, TableDef{Name: "t"})
	t.Cleanup(release) // before the store's Close (cleanups run last first)
	write := func(from int) {
		apply(t, db, func(b *Batch) {
			for i := range 100 {
				b.Put("t", []byte("p"), fmt.Appendf(nil, "k%05d", from+i), []byte("c"), []byte("v"), int64(100+from+i))
			}
		})
	}
	write(0)
	flushed := make(chan error, 1)
	go func() { flushed <- db.Flush() }()
	var changed <-chan struct{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		bytes, frozen, ch := db.MemtableUsageChange()
		if frozen == 1 && bytes > 0 {
			changed = ch
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no frozen memtable 30 s after Flush began: %d bytes, %d frozen", bytes, frozen)
		}
	}
	write(100)
	select {
	case <-changed:
		t.Fatal("the channel was closed while the flush was held and only a write came")
	default:
	}

	release()
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the channel was not closed within 30 s of the flush's release")
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if _, frozen, _ := db.MemtableUsageChange(); frozen != 0 {
		t.Fatalf("after the flush: %d frozen memtables; want none", frozen)
	}

	_, _, changed = db.MemtableUsageChange()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Close left the channel open")
	}
	if _, _, changed := db.MemtableUsageChange(); changed != nil {
		select {
		case <-changed:
		default:
			t.Fatal("after Close, MemtableUsageChange hands out a channel that no event will close")
		}
	}
}
