package main

import (
	"runtime/debug"
	"testing"
)

func TestApplyGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
		gc   int // the percent in effect after
	}{
		{"no GOGC: the default", nil, "400", DefaultGCPercent},
		{"empty GOGC: the default", map[string]string{"GOGC": " "}, "400", DefaultGCPercent},
		{"GOGC wins", map[string]string{"GOGC": "100"}, "GOGC=100", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			got := applyGCPercent(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if got != tc.want {
				t.Errorf("applyGCPercent = %q, want %q", got, tc.want)
			}
			if now := debug.SetGCPercent(100); now != tc.gc {
				t.Errorf("GC percent after applyGCPercent = %d, want %d", now, tc.gc)
			}
		})
	}
}
