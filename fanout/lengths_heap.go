//go:build !(linux || darwin || freebsd)

package fanout

// mapTable has no anonymous mmap on this platform: the length table is
// an ordinary Go allocation.
func mapTable(int) []byte { return nil }

func unmapTable([]byte) {}
