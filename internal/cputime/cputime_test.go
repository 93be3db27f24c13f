package cputime

import (
	"testing"
	"time"
)

// TestProcessCountsWork checks that the time read grows by at least the
// CPU a busy loop is known to have spent on this thread (the thread's own
// clock, read around it), and never goes backwards.
func TestProcessCountsWork(t *testing.T) {
	before, err := Process()
	if err != nil {
		t.Skipf("no process CPU time here: %v", err)
	}
	lockThread(t)
	threadBefore := threadCPU(t)
	x := uint64(1)
	for threadCPU(t)-threadBefore < 20*time.Millisecond {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	after := MustProcess(t.Fatal)
	if x == 0 {
		t.Log(x) // keep the loop
	}
	if got := after - before; got < 15*time.Millisecond {
		t.Fatalf("process CPU time grew by %v across a loop that spent at least 20ms of CPU", got)
	}
}
