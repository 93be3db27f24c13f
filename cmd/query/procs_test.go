package main

import "testing"

func TestApplyMaxProcs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        map[string]string
		cpus       int // the runtime's default
		want       string
		procsAfter int
	}{
		{"2 CPUs: one P", nil, 2, "1 (2 CPUs: a small host)", 1},
		{"1 CPU: unchanged", nil, 1, "1", 1},
		{"4 CPUs: the runtime's default", nil, 4, "4", 4},
		{"empty GOMAXPROCS: as unset", map[string]string{"GOMAXPROCS": " "}, 2, "1 (2 CPUs: a small host)", 1},
		{"GOMAXPROCS wins", map[string]string{"GOMAXPROCS": "2"}, 2, "GOMAXPROCS=2", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs := tc.cpus
			got := applyMaxProcs(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, func(n int) int {
				prev := procs
				if n > 0 {
					procs = n
				}
				return prev
			})
			if got != tc.want {
				t.Errorf("applyMaxProcs = %q, want %q", got, tc.want)
			}
			if procs != tc.procsAfter {
				t.Errorf("GOMAXPROCS after applyMaxProcs = %d, want %d", procs, tc.procsAfter)
			}
		})
	}
}
