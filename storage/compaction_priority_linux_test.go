package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// threadNice reads the nice value of thread tid of this process from
// /proc (field 19 of its stat line).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatalf("stat of thread %d: %v", tid, err)
	}
	return n
}

// TestCompactionNice: with CompactionNice a background compaction merges
// on a thread whose nice value is raised by it, and that thread is gone
// once the compaction is done, so no other goroutine ever runs at the
// lowered priority (every thread left has the process's nice value). With
// 0 the merge runs at the process's priority.
func TestCompactionNice(t *testing.T) {
	base := threadNice(t, syscall.Gettid())
	for _, tc := range []struct {
		nice, want int
	}{
		{0, base},
		{7, min(base+7, 19)},
		{40, 19},
	} {
		t.Run(strconv.Itoa(tc.nice), func(t *testing.T) {
			db := openTestDBIn(t, t.TempDir(), &fakeClock{now: time.Unix(1_800_000_000, 0)}, func(o *Options) {
				o.DisableAutoCompaction = false
				o.CompactionNice = tc.nice
			}, TableDef{Name: "t"})
			var mu sync.Mutex
			seen := map[int]int{} // tid -> nice, from the merge's thread
			db.compactionThreadHook = func() {
				tid := syscall.Gettid()
				n := threadNice(t, tid)
				mu.Lock()
				seen[tid] = n
				mu.Unlock()
			}
			for f := range 6 {
				apply(t, db, func(b *Batch) {
					for i := range 100 {
						b.Put("t", []byte("p"), []byte(fmt.Sprintf("ck%04d", i)), []byte("v"), []byte("value"), int64(f*1000+i+1))
					}
				})
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "a background compaction", func() bool { return db.Metrics().Compactions > 0 })
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.nice == 0 {
				if len(seen) != 0 {
					t.Fatalf("CompactionNice 0 ran a merge on a thread of its own: %v", seen)
				}
				return
			}
			if len(seen) == 0 {
				t.Fatal("no compaction ran on a lowered-priority thread")
			}
			for tid, n := range seen {
				if n != tc.want {
					t.Errorf("merge thread %d had nice %d, want %d", tid, n, tc.want)
				}
			}
			// The merge threads must have exited: every thread left runs
			// at the process's nice value. The exception is the main
			// thread (tid = pid): when a locked goroutine ends there, the
			// runtime parks that thread for good instead of ending it, so
			// it never runs a goroutine again.
			main := os.Getpid()
			waitFor(t, "the merge threads to exit", func() bool {
				tasks, err := filepath.Glob("/proc/self/task/*")
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range tasks {
					tid, _ := strconv.Atoi(filepath.Base(task))
					if _, ok := seen[tid]; ok && tid != main {
						return false
					}
				}
				return true
			})
			tasks, _ := filepath.Glob("/proc/self/task/*")
			for _, task := range tasks {
				tid, _ := strconv.Atoi(filepath.Base(task))
				if _, ok := seen[tid]; ok && tid == main {
					continue
				}
				if n := threadNice(t, tid); n != base {
					t.Errorf("thread %d has nice %d after the compactions, want the process's %d", tid, n, base)
				}
			}
		})
	}
}
