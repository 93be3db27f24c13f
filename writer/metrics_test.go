package writer

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestIngestedTypeLabels: the first maxTypeLabels event types seen each
// count under their own label, every later one under otherTypeLabel, and a
// type keeps its label however often it comes back.
func TestIngestedTypeLabels(t *testing.T) {
	m := newMetrics()
	const extra = 10
	for round := range 2 {
		for i := range maxTypeLabels + extra {
			m.ingestedOf(fmt.Sprintf("t%d", i)).Add(float64(round + 1))
		}
	}
	for _, typ := range []string{"t0", fmt.Sprintf("t%d", maxTypeLabels-1)} {
		if got := testutil.ToFloat64(m.ingested.WithLabelValues(typ)); got != 3 {
			t.Errorf("ingested{type=%q} = %v, want 3", typ, got)
		}
	}
	if got := testutil.ToFloat64(m.ingested.WithLabelValues(otherTypeLabel)); got != 3*extra {
		t.Errorf("ingested{type=%q} = %v, want %d", otherTypeLabel, got, 3*extra)
	}
	if got := testutil.CollectAndCount(m.ingested); got != maxTypeLabels+1 {
		t.Errorf("%d type labels, want %d", got, maxTypeLabels+1)
	}
}
