package storage

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Health is the store's write health.
type Health struct {
	Err       error // nil while writes are accepted; else what stops them (names the file/op)
	Permanent bool  // true when only a restart can recover (e.g. a failed fsync)
}

// Health returns the store's write health. A permanent error is a failed
// WAL fsync, a WAL segment that could not be restored after a failed write,
// or a flush or compaction that failed other than for lack of space: writes
// are refused until a restart. A transient error is the latest failure of
// a WAL write, flush or compaction for lack of space (ENOSPC, EDQUOT): WAL
// writes are retried by the next Apply, flushes and compactions in the
// background with backoff, and the error clears once one succeeds.
func (db *DB) Health() Health {
	db.mu.Lock()
	defer db.mu.Unlock()
	switch {
	case db.bgErr != nil:
		return Health{Err: db.bgErr, Permanent: true}
	case db.closed:
		return Health{Err: ErrClosed, Permanent: true}
	case db.walErr != nil:
		return Health{Err: db.walErr}
	case db.flushErr != nil:
		return Health{Err: db.flushErr}
	case db.compactErr != nil:
		return Health{Err: db.compactErr}
	}
	return Health{}
}

// isNoSpace reports whether err is a lack of space that freeing space
// cures, so the operation may be retried. A manifest that may already be
// installed is never retried: the files it names must not be discarded.
func isNoSpace(err error) bool {
	return (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && !errors.Is(err, errManifestUnsynced)
}

// Backoff between retries of a flush or compaction that failed for lack
// of space.
const (
	retryMinBackoff = 50 * time.Millisecond
	retryMaxBackoff = 2 * time.Second
)

func retryBackoff(attempt int) time.Duration {
	return min(retryMinBackoff<<min(attempt, 16), retryMaxBackoff)
}

// setTransientError records err (a failure that a retry may cure) in *slot
// for Health, logging it the first time.
func (db *DB) setTransientError(slot *error, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if *slot == nil {
		db.log.Error("storage write failed; retrying", "err", err)
	}
	*slot = err
	db.broadcastLocked()
}

// clearTransientError clears *slot after a success.
func (db *DB) clearTransientError(slot *error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if *slot != nil {
		db.log.Info("storage writes resumed", "after", (*slot).Error())
		*slot = nil
	}
}

// walError classifies a failed WAL append or rotation: permanent when the
// WAL writer failed for good, else transient.
func (db *DB) walError(op string, err error) {
	if perr := db.wal.Err(); perr != nil {
		db.setBackgroundError(fmt.Errorf("wal %s: %w", op, perr))
		return
	}
	db.walFailing.Store(true)
	db.setTransientError(&db.walErr, fmt.Errorf("wal %s: %w", op, err))
}
