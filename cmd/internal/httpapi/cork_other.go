//go:build !linux

package httpapi

import "errors"

func setsockoptCork(fd uintptr, on bool) error {
	return errors.New("TCP_CORK is Linux's")
}
