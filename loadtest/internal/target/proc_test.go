package target

import (
	"os"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	line := "4242 (eventide ingest) (x)) S 1 4242 4242 0 -1 4194560 2130 0 0 0 1250 375 0 0 20 0 12 0 8842 1234567 2345 18446744073709551615\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 1625 {
		t.Fatalf("parseStatCPU = %d, %v, want 1625", got, err)
	}
	for _, bad := range []string{"", "1 (a", "1 (a) S 1 2", "1 (a) S 1 2 3 4 5 6 7 8 9 10 x 12"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded", bad)
		}
	}
}

func TestParseStatusRSS(t *testing.T) {
	got, err := parseStatusRSS([]byte("Name:\tingest\nVmPeak:\t  9000 kB\nVmRSS:\t   51234 kB\nThreads: 9\n"))
	if err != nil || got != 51234 {
		t.Fatalf("parseStatusRSS = %d, %v, want 51234", got, err)
	}
	for _, bad := range []string{"", "VmRSS: 12 MB\n", "VmRSS: x kB\n", "VmRSS: -1 kB"} {
		if _, err := parseStatusRSS([]byte(bad)); err == nil {
			t.Errorf("parseStatusRSS(%q) succeeded", bad)
		}
	}
}

// The parsers read this very process's /proc files.
func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		if strings.Contains(err.Error(), "no such file") {
			t.Skip("no /proc here")
		}
		t.Fatal(err)
	}
	if s.RSSBytes <= 0 || s.CPUSeconds < 0 {
		t.Fatalf("sample %+v", s)
	}
}

func FuzzParseStatCPU(f *testing.F) {
	f.Add("4242 (eventide ingest) S 1 4242 4242 0 -1 4194560 2130 0 0 0 1250 375 0 0 20 0 12 0")
	f.Add("1 ()) R 0 0 0 0 0 0 0 0 0 0 18446744073709551615 1")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseStatCPU([]byte(s))
	})
}

func FuzzParseStatusRSS(f *testing.F) {
	f.Add("VmRSS:\t 5 kB\n")
	f.Add("Name: x\nVmRSS: 99999999999999999999 kB")
	f.Fuzz(func(t *testing.T, s string) {
		kb, err := parseStatusRSS([]byte(s))
		if err == nil && kb < 0 {
			t.Fatalf("negative RSS %d", kb)
		}
	})
}
