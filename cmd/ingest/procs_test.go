package main

import (
	"runtime"
	"testing"
)

// TestApplyExtraProcs: --extra-procs adds Ps to the runtime's default,
// not to the current setting (so applying it twice does not add up), and
// gives way to GOMAXPROCS when that is set.
func TestApplyExtraProcs(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name    string
		extra   int
		env     map[string]string
		want    int
		changed bool
	}{
		{"default", DefaultExtraProcs, nil, def + DefaultExtraProcs, DefaultExtraProcs > 0},
		{"none", 0, nil, def, false},
		{"three", 3, nil, def + 3, true},
		{"GOMAXPROCS set", 3, map[string]string{"GOMAXPROCS": "1"}, 7, false},
		{"GOMAXPROCS empty", 2, map[string]string{"GOMAXPROCS": " "}, def + 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(7) // a setting of its own, which only GOMAXPROCS keeps
			for range 2 {         // twice: the second must not add up
				n, changed := applyExtraProcs(tc.extra, envFrom(tc.env))
				if changed != tc.changed || n != tc.want || runtime.GOMAXPROCS(0) != tc.want {
					t.Fatalf("applyExtraProcs(%d) = %d, %v; GOMAXPROCS now %d; want %d, %v", tc.extra, n, changed, runtime.GOMAXPROCS(0), tc.want, tc.changed)
				}
			}
		})
	}
}
