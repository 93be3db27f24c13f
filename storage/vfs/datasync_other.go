//go:build !linux

package vfs

// SyncData falls back to a full sync where fdatasync is not available.
func (f osFile) SyncData() error { return f.Sync() }
