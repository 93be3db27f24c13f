//go:build !amd64

package memtable

// prefetch does nothing where no assembly version exists.
func prefetch(addr uintptr) {}
