package httpapi

import "syscall"

func setsockoptCork(fd uintptr, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
}
