//go:build !(linux || darwin || freebsd)

package memtable

// mmapSlabs says slabs are mapped from the OS, outside the Go heap: not
// on this platform, where they are ordinary Go allocations.
const mmapSlabs = false

func mapSlab(int) []byte { return nil }

func unmapSlab([]byte) {}

const hugePageBytes = 2 << 20

func mapHugeSlab(int) []byte { return nil }

func unmapHugeSlab([]byte) {}
