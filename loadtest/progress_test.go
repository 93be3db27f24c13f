package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/eventide/eventide/loadtest/internal/hist"
)

// The progress line redraws one line when on, and writes nothing when
// off (as when stderr is not a terminal: a buffer is not one).
func TestProgressLine(t *testing.T) {
	var on, auto bytes.Buffer
	lat := hist.NewSet(1, time.Now())
	lat.Record(0, "publish", 2*time.Millisecond)
	lat.Tick(time.Now())
	ev := &eventLoad{}
	ev.acked.Store(1234)
	probes := newProbeTracker(nil, "lt-x-probe", lat)
	newProgress("on", &on).line(3*time.Second, 500, ev, nil, probes, lat, nil, nil)
	newProgress("auto", &auto).line(3*time.Second, 500, ev, nil, probes, lat, nil, nil)
	if got := on.String(); !strings.HasPrefix(got, "\r\033[K[    3s] 500/s events acked 1234 failed 0 p99 2ms") {
		t.Errorf("progress line %q", got)
	}
	if auto.Len() != 0 {
		t.Errorf("auto mode on a buffer wrote %q", auto.String())
	}
}
