//go:build linux || darwin || freebsd

package fanout

import (
	"runtime"
	"testing"
)

// TestLengthsOffHeap: the default length table (4 MiB) is mapped from the
// OS, not allocated on the Go heap, where it counted towards the
// collector's goal; and it works as a table.
func TestLengthsOffHeap(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := newLengths(DefaultOptions().TrimTracked)
	runtime.ReadMemStats(&after)
	if grew := after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc); grew >= 1<<20 {
		t.Fatalf("a length table of %d slots grew the Go heap by %d bytes, want it mapped outside it", len(l.slots), grew)
	}
	h := uint64(0xdeadbeef12345678)
	l.set(h, 7)
	if bound, known := l.add(h, 2); !known || bound != 9 {
		t.Fatalf("add after set(7): bound %d known %v, want 9 true", bound, known)
	}
	runtime.KeepAlive(l)
}
