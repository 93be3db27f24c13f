package target

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times. Linux fixes it at
// 100 for user space (USER_HZ) whatever the kernel's own HZ.
const userHZ = 100

// ProcSample is a process's resources at one instant.
type ProcSample struct {
	At         time.Time
	RSSBytes   int64
	CPUSeconds float64 // user + system since the process started
}

// ReadProc reads pid's RSS and CPU time from /proc.
func ReadProc(pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("cannot read process %d's stat: %w", pid, err)
	}
	ticks, err := parseStatCPU(stat)
	if err != nil {
		return s, fmt.Errorf("cannot parse /proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("cannot read process %d's status: %w", pid, err)
	}
	rssKB, err := parseStatusRSS(status)
	if err != nil {
		return s, fmt.Errorf("cannot parse /proc/%d/status: %w", pid, err)
	}
	s.CPUSeconds = float64(ticks) / userHZ
	s.RSSBytes = rssKB * 1024
	return s, nil
}

// parseStatCPU returns utime + stime (fields 14 and 15, in clock ticks)
// of a /proc/<pid>/stat line. The command name (field 2) is in
// parentheses and may hold spaces and parentheses itself, so fields are
// counted from the last ')'.
func parseStatCPU(b []byte) (uint64, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, errors.New("no ) closing the command name")
	}
	// After ") " come fields 3 (state) onwards.
	fields := bytes.Fields(b[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("%d fields after the command name, want at least %d", len(fields), stime+1)
	}
	u, err := strconv.ParseUint(string(fields[utime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime %q: %w", fields[utime], err)
	}
	s, err := strconv.ParseUint(string(fields[stime]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime %q: %w", fields[stime], err)
	}
	if u+s < u {
		return 0, errors.New("utime + stime overflows")
	}
	return u + s, nil
}

// parseStatusRSS returns VmRSS in kB from /proc/<pid>/status.
func parseStatusRSS(b []byte) (int64, error) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("VmRSS line %q is not \"VmRSS: <n> kB\"", line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return 0, fmt.Errorf("VmRSS %q is not a size in kB", f[0])
		}
		return kb, nil
	}
	return 0, errors.New("no VmRSS line")
}
