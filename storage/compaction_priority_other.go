//go:build !linux

package storage

// threadNiceSupported is false where a nice value belongs to the whole
// process: lowering it would slow the foreground too.
const threadNiceSupported = false

func lowerThreadPriority(delta int) error { return nil }
