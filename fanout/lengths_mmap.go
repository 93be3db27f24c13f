//go:build linux || darwin || freebsd

package fanout

import "syscall"

// mapTable maps n bytes of anonymous, zeroed memory outside the Go heap
// for the length table, or returns nil if the mapping fails (the table is
// then an ordinary Go allocation).
func mapTable(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// unmapTable returns a mapping of mapTable to the OS. It cannot fail for
// a mapping mapTable made; if it did, the memory would only stay mapped.
func unmapTable(b []byte) { _ = syscall.Munmap(b) }
