package writer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFetchBoundedByBytes publishes large events before the writer starts,
// so that all are ready at once, with a byte bound that two of them
// exceed: every fetch must hold one message, and events larger than the
// bound alone (the head of the stream among them) are still fetched and
// stored rather than wedging the writer.
func TestFetchBoundedByBytes(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db := openDB(t, t.TempDir())
	types := testTypes(t)
	js := jsFor(t, nc)
	const bound = 256 << 10
	w := newWriter(t, nc, db, Config{Types: types, FetchMaxBytes: bound, MaxPayload: 1 << 20})

	rng := newRand(t)
	evs := genEvents(rng, 0, 40, testEventTypes, time.Now().Add(-time.Hour), 50*time.Minute)
	for i := range evs {
		size := 150 << 10 // two exceed the bound
		if i%10 == 0 {
			size = 600 << 10 // alone exceeds the bound; i == 0 is the head of the stream
		}
		evs[i].body = fmt.Appendf(nil, `{"type":%q,"time":%d,"data":{"n":%d,"pad":"%s"}}`,
			evs[i].typ, evs[i].time.UnixMilli(), evs[i].n, strings.Repeat("x", size))
	}
	if err := publishAll(context.Background(), js, evs); err != nil {
		t.Fatal(err)
	}
	r := runWriter(t, w)
	waitApplied(t, w, js, DefaultStream, 30*time.Second)
	r.stop(t)
	checkStoredExactlyOnce(t, db, types, evs)

	reg := prometheus.NewRegistry()
	reg.MustRegister(w.m.consumer.BatchSize)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("cannot gather the batch size histogram: %v", err)
	}
	h := mfs[0].GetMetric()[0].GetHistogram()
	var single uint64
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 1 {
			single = b.GetCumulativeCount()
		}
	}
	if h.GetSampleCount() == 0 || single != h.GetSampleCount() {
		t.Errorf("%d of %d fetches held more than one message of 150 KiB or more, with a bound of %d bytes (sum %v messages)",
			h.GetSampleCount()-single, h.GetSampleCount(), bound, h.GetSampleSum())
	}
}
