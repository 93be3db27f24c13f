package storage

import (
	"errors"
	"fmt"
)

// errCheckFailed heads the error Check returns.
var errCheckFailed = errors.New("eventide/storage: check failed")

// Check verifies every live SSTable (every block's checksum, decoding and
// order) and returns all problems found, joined; each wraps ErrCorruption
// where the bytes are at fault and names the file.
func (db *DB) Check() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	v := db.current
	v.ref()
	db.mu.Unlock()
	defer v.unref()
	var errs []error
	for _, list := range v.sstables {
		for _, h := range list {
			if err := h.reader.Check(); err != nil {
				errs = append(errs, fmt.Errorf("sstable %s: %w", h.path, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", errCheckFailed, errors.Join(errs...))
	}
	return nil
}
