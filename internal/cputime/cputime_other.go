//go:build !unix

package cputime

import (
	"errors"
	"fmt"
	"time"
)

func process() (time.Duration, error) {
	return 0, fmt.Errorf("read the process's CPU time: %w", errors.ErrUnsupported)
}
