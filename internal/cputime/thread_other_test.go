//go:build !linux

package cputime

import (
	"testing"
	"time"
)

func threadCPU(t *testing.T) time.Duration {
	t.Skip("the thread CPU clock is read on Linux only")
	return 0
}

func lockThread(t *testing.T) {}
