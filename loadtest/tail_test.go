package main

import (
	"strings"
	"testing"
	"time"
)

// The tail check counts, per subscriber, acknowledged probes it never got
// and probes it got twice; a probe received without an ack is allowed.
func TestTailCheck(t *testing.T) {
	probes := newProbeTracker(nil, "lt-x-probe", nil)
	for _, n := range []int64{0, 1, 2, 3} {
		probes.publishing(n, time.Now())
		probes.acked(n)
	}
	tl := newTailLoad(nil, "lt-x-probe", 2, nil)
	tl.subs[0].received = []uint32{1, 1, 1, 1, 1} // 4 was never acked: allowed
	tl.subs[1].received = []uint32{1, 0, 2}       // 1 and 3 missing, 2 twice
	tl.subs[0].count, tl.subs[1].count = 5, 3
	c, res := tl.check(probes, 5)
	if c.Passed || !strings.Contains(c.Detail, "2 acked probes missing at a subscriber, 1 more than once") || res.Received != 8 {
		t.Errorf("check = %+v, result %+v", c, res)
	}
	if tl.complete(probes, 5) {
		t.Error("complete with probes missing at subscriber 1")
	}
	tl.subs[1].received = []uint32{1, 1, 1, 1}
	if c, _ := tl.check(probes, 5); !c.Passed || !tl.complete(probes, 5) {
		t.Errorf("every probe once: check %+v, complete %v", c, tl.complete(probes, 5))
	}
}
