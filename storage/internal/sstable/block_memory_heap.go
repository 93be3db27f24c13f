//go:build !(linux || darwin || freebsd)

package sstable

// mmapBlocks says a Cache's block buffers are mapped from the OS: not on
// this platform, where they are Go allocations recycled by the arena.
const mmapBlocks = false

func mapBlockMemory(int) []byte { return nil }

func unmapBlockMemory([]byte) {}
