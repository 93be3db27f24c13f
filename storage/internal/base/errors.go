package base

import (
	"errors"
	"fmt"
)

// ErrCorruption is returned (wrapped, with the file and offset) when stored
// bytes fail a checksum or cannot be decoded. Check it with errors.Is.
var ErrCorruption = errors.New("eventide/storage: corruption")

// CorruptionErrorf formats an error that wraps ErrCorruption.
func CorruptionErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruption, fmt.Sprintf(format, args...))
}
