package writer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eventide/eventide/storage"
)

// TestConsumerLagSeconds: the lag gauge is the age of the oldest message
// fetched and not stored: 0 once everything is stored, above 0 while a
// batch cannot be stored.
func TestConsumerLagSeconds(t *testing.T) {
	s := startNATS(t, t.TempDir(), -1)
	nc := connect(t, s.ClientURL())
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	types := testTypes(t)
	w := newWriter(t, nc, db, Config{Types: types})
	r := runWriter(t, w)
	js := jsFor(t, nc)
	evs := genEvents(newRand(t), 0, 50, testEventTypes, time.Now().Add(-time.Hour), 30*time.Minute)
	if err := publishAll(context.Background(), js, evs[:25]); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, w, js, DefaultStream, 20*time.Second)
	lag := func() float64 { return testutil.ToFloat64(w.m.consumer.LagSeconds) }
	if got := lag(); got != 0 {
		t.Errorf("lag with everything stored = %v s, want 0", got)
	}

	if err := db.Close(); err != nil { // every Apply fails from now on
		t.Fatal(err)
	}
	if err := publishAll(context.Background(), js, evs[25:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool {
		return testutil.ToFloat64(w.m.consumer.WaitingStorage) == 1 && lag() > 0
	}, func() string { return fmt.Sprintf("lag %v s while storage fails", lag()) })
	r.stop(t)
}

// TestRejectionLogs: each rejection is logged at debug; with debug off, at
// most one line per interval at info.
func TestRejectionLogs(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			s := startNATS(t, t.TempDir(), -1)
			nc := connect(t, s.ClientURL())
			db := openDB(t, t.TempDir())
			var buf lockedBuffer
			logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
			w := newWriter(t, nc, db, Config{Logger: logger})
			r := runWriter(t, w)
			js := jsFor(t, nc)
			const rejects = 5
			for range rejects {
				publishOne(t, js, "events.view", []byte(`not json`))
			}
			waitApplied(t, w, js, DefaultStream, 20*time.Second)
			r.stop(t)
			var lines []string
			for l := range strings.SplitSeq(buf.String(), "\n") {
				if strings.Contains(l, "message rejected to the dead-letter stream") {
					lines = append(lines, l)
				}
			}
			want, wantLevel := 1, "level=INFO"
			if level == slog.LevelDebug {
				want, wantLevel = rejects, "level=DEBUG"
			}
			if len(lines) != want {
				t.Fatalf("%d rejection lines, want %d:\n%s", len(lines), want, strings.Join(lines, "\n"))
			}
			for _, l := range lines {
				if !strings.Contains(l, wantLevel) || !strings.Contains(l, "reason=malformed_json") || !strings.Contains(l, "seq=") {
					t.Errorf("rejection line %q lacks %s, the reason or the sequence", l, wantLevel)
				}
			}
		})
	}
}
