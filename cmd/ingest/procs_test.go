package main

import (
	"runtime"
	"testing"
)

// TestCompactionProcs: one spare P only when compactions run at a lowered
// priority and GOMAXPROCS is not set.
func TestCompactionProcs(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	for _, tc := range []struct {
		name    string
		nice    int
		env     map[string]string
		changed bool
	}{
		{"not lowered", 0, nil, false},
		{"lowered", 10, nil, true},
		{"lowered, GOMAXPROCS set", 10, map[string]string{"GOMAXPROCS": "2"}, false},
		{"lowered, GOMAXPROCS empty", 5, map[string]string{"GOMAXPROCS": " "}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(orig)
			n, changed := compactionProcs(tc.nice, envFrom(tc.env))
			want := orig
			if tc.changed {
				want = orig + 1
			}
			if changed != tc.changed || n != want || runtime.GOMAXPROCS(0) != want {
				t.Fatalf("compactionProcs(%d) = %d, %v; GOMAXPROCS now %d; want %d, %v", tc.nice, n, changed, runtime.GOMAXPROCS(0), want, tc.changed)
			}
		})
	}
}
