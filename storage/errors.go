package storage

import "github.com/eventide/eventide/storage/internal/base"

// ErrCorruption is wrapped by every error caused by stored bytes that fail
// a checksum or cannot be decoded; the message names the file and offset.
// Check it with errors.Is.
var ErrCorruption = base.ErrCorruption
