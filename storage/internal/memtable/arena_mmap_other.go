//go:build darwin || freebsd || (linux && !(amd64 || arm64))

package memtable

const hugePageBytes = 2 << 20

// mapHugeSlab returns nil: huge pages are asked for on Linux on amd64 and
// arm64 only.
func mapHugeSlab(int) []byte { return nil }

func unmapHugeSlab([]byte) {}
