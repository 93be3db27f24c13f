//go:build windows

package main

import "golang.org/x/sys/windows"

// diskSpace returns the bytes available to this process and the total
// size of the volume holding dir (GetDiskFreeSpaceEx).
func diskSpace(dir string) (free, size uint64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, err
	}
	var total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, &totalFree); err != nil {
		return 0, 0, err
	}
	return free, total, nil
}
