package storage

import (
	"fmt"
	"syscall"
)

const threadNiceSupported = true

// lowerThreadPriority adds delta to the calling OS thread's nice value
// (capped at 19). On Linux the nice value belongs to a thread, so
// setpriority(PRIO_PROCESS, tid) changes this thread alone.
func lowerThreadPriority(delta int) error {
	tid := syscall.Gettid()
	// The raw getpriority system call returns 20 - nice.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return fmt.Errorf("getpriority of thread %d: %w", tid, err)
	}
	nice := min(20-raw+delta, 19)
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
		return fmt.Errorf("setpriority of thread %d to nice %d: %w", tid, nice, err)
	}
	return nil
}
