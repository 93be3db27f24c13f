package storage

import (
	"errors"

	"github.com/eventide/eventide/storage/internal/base"
)

// ErrCorruption is wrapped by every error caused by stored bytes that fail
// a checksum or cannot be decoded; the message names the file and offset.
// Check it with errors.Is.
var ErrCorruption = base.ErrCorruption

// ErrMissingManifest is returned by Open when the directory has no MANIFEST
// but holds SSTables or WAL segments with records: the store lost the file
// that says which of them are live, and opening it as a new, empty store
// would delete the SSTables as orphans. The error lists what was found.
// Restore the MANIFEST (or move the files away) before opening again.
var ErrMissingManifest = errors.New("eventide/storage: MANIFEST is missing but data files exist")
