package storage

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	crashCycles = flag.Int("crash.cycles", 20, "kill/recover cycles in TestCrashRecovery")
	crashSeed   = flag.Uint64("crash.seed", 0, "seed of TestCrashRecovery's kill schedule (0 = random)")
)

const (
	crashChildEnv     = "EVENTIDE_CRASH_CHILD_DIR"
	crashStartEnv     = "EVENTIDE_CRASH_CHILD_START"
	crashCellsPerRow  = 5
	crashPartitions   = 7
	crashWriterCount  = 4
	crashTable        = "crash"
	crashValuePadding = 120
)

func crashTableDef() TableDef {
	return TableDef{Name: crashTable, Compaction: SizeTiered, MinThreshold: 2}
}

// crashBatch is batch number i: one row of crashCellsPerRow cells, so a
// partially applied batch shows up as a row with missing cells.
func crashBatch(i int) *Batch {
	var b Batch
	pk := []byte(fmt.Sprintf("p%d", i%crashPartitions))
	ck := []byte(fmt.Sprintf("%010d", i))
	for c := 0; c < crashCellsPerRow; c++ {
		v := fmt.Sprintf("batch-%d-cell-%d-%s", i, c, bytes.Repeat([]byte{'x'}, crashValuePadding))
		b.Put(crashTable, pk, ck, []byte(fmt.Sprintf("c%d", c)), []byte(v), int64(i)+1)
	}
	return &b
}

// TestCrashChild is the child process of TestCrashRecovery: it applies
// batches from several goroutines and prints each batch number once Apply
// has returned (so it is durable), until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as TestCrashRecovery's child process")
	}
	start, _ := strconv.Atoi(os.Getenv(crashStartEnv))
	opts := DefaultOptions()
	opts.MemtableSize = 64 << 10 // flush often so kills land mid-flush too
	db, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	if err := db.CreateTable(crashTableDef()); err != nil {
		fmt.Fprintln(os.Stderr, "child create table:", err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < crashWriterCount; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := start + w; ; i += crashWriterCount {
				if err := db.Apply(context.Background(), crashBatch(i)); err != nil {
					fmt.Fprintln(os.Stderr, "child apply:", err)
					os.Exit(3)
				}
				outMu.Lock()
				fmt.Fprintf(out, "%d\n", i)
				out.Flush()
				outMu.Unlock()
			}
		}(w)
	}
	wg.Wait()
}

// TestCrashRecovery kills a child process that applies synced batches at
// random moments with SIGKILL, reopens the store, and checks that every
// batch the child reported as applied is present and that no batch is
// partially present.
func TestCrashRecovery(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("child")
	}
	if testing.Short() {
		t.Skip("kills child processes; skipped in -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The seed fixes when each child is killed (after how many acknowledged
	// batches, and the extra delay); what the child has in flight at that
	// moment still depends on scheduling, so a rerun replays the schedule,
	// not every byte.
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	acked := map[int]bool{}
	next := 0
	for cycle := 0; cycle < *crashCycles; cycle++ {
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashStartEnv+"="+strconv.Itoa(next))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + rng.IntN(300)
		sc := bufio.NewScanner(stdout)
		seen := 0
		for sc.Scan() {
			i, err := strconv.Atoi(sc.Text())
			if err != nil {
				continue // test framework output
			}
			acked[i] = true
			seen++
			if seen == killAfter {
				// Let in-flight batches get partway, then kill.
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		// Drain acks printed before the kill took effect.
		for sc.Scan() {
			if i, err := strconv.Atoi(sc.Text()); err == nil {
				acked[i] = true
			}
		}
		cmd.Wait()
		if seen < killAfter {
			t.Fatalf("cycle %d: child exited early after %d batches: %s", cycle, seen, stderr.String())
		}

		present, maxSeen := verifyCrashStore(t, dir, cycle)
		for i := range acked {
			if !present[i] {
				t.Fatalf("cycle %d (seed %d): batch %d was acknowledged but is missing after recovery", cycle, seed, i)
			}
		}
		next = maxSeen + crashWriterCount + 1
	}
	t.Logf("%d cycles, %d acknowledged batches all recovered", *crashCycles, len(acked))
}

// verifyCrashStore opens the store, checks every row is whole, and returns
// the batches present and the largest batch number.
func verifyCrashStore(t *testing.T, dir string, cycle int) (map[int]bool, int) {
	t.Helper()
	db, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatalf("cycle %d: reopen after kill: %v", cycle, err)
	}
	defer db.Close()
	if err := db.CreateTable(crashTableDef()); err != nil {
		t.Fatal(err)
	}
	present := map[int]bool{}
	maxSeen := -1
	for p := 0; p < crashPartitions; p++ {
		rows, _ := readAll(t, db, SliceQuery{Table: crashTable, Partition: []byte(fmt.Sprintf("p%d", p))})
		for _, r := range rows {
			i, err := strconv.Atoi(string(r.Clustering))
			if err != nil {
				t.Fatalf("cycle %d: bad clustering %q", cycle, r.Clustering)
			}
			if len(r.Cells) != crashCellsPerRow {
				t.Fatalf("cycle %d: batch %d is partial: %d of %d cells", cycle, i, len(r.Cells), crashCellsPerRow)
			}
			for c, cell := range r.Cells {
				want := fmt.Sprintf("batch-%d-cell-%d-", i, c)
				if !bytes.HasPrefix(cell.Value, []byte(want)) {
					t.Fatalf("cycle %d: batch %d cell %d holds %q", cycle, i, c, cell.Value)
				}
			}
			present[i] = true
			maxSeen = max(maxSeen, i)
		}
	}
	if err := db.Check(); err != nil {
		t.Fatalf("cycle %d: check after recovery: %v", cycle, err)
	}
	return present, maxSeen
}
