package consumer

import (
	"context"
	"fmt"
	"github.com/eventide/eventide/internal/natsembed"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/bucket/schema"
	"github.com/eventide/eventide/catalog"
	"github.com/eventide/eventide/storage"
)

// countingHandler is the smallest Handler: every message adds one to a
// per-minute counter, so a message applied twice shows as a count too
// high.
type countingHandler struct {
	minute time.Time
	stored atomic.Int64
}

type countingBatch struct {
	h *countingHandler
	n int
}

func (h *countingHandler) Prepare(ds []Delivery, epoch uint64) Batch {
	return &countingBatch{h: h, n: len(ds)}
}

func (b *countingBatch) Write(ctx context.Context, sb *storage.Batch) error {
	return catalog.AddCount(sb, "seam", b.h.minute, int64(b.n))
}

func (b *countingBatch) Stored() { b.h.stored.Add(int64(b.n)) }

func readCount(t *testing.T, db *storage.DB, minute time.Time) int64 {
	t.Helper()
	partition, err := schema.CountsPartition("seam", minute)
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.Slice(context.Background(), storage.SliceQuery{Table: schema.CountsTable, Partition: partition})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var total int64
	for it.Next() {
		_, n, err := catalog.DecodeCount(it.Row())
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestHandlerExactlyOnce runs the loop with a Handler of its own (not the
// writer's) over several runs: every message takes effect exactly once and
// the checkpoint ends at the stream's last sequence.
func TestHandlerExactlyOnce(t *testing.T) {
	nc, js := startJetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SEAM", Subjects: []string{"seam.>"}}); err != nil {
		t.Fatal(err)
	}
	db := openStore(t)
	h := &countingHandler{minute: time.Now().UTC().Truncate(time.Minute)}
	cfg := Config{Stream: "SEAM", Durable: "seam", FetchBatch: 7, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	total := 0
	for run := range 3 {
		c, err := New(ctx, nc, db, cfg, h)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx) }()
		for i := range 50 {
			if _, err := js.Publish(ctx, fmt.Sprintf("seam.r%d", run), []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		total += 50
		deadline := time.Now().Add(20 * time.Second)
		for c.Stats().LastAppliedSeq < uint64(total) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: checkpoint at %d, want %d", run, c.Stats().LastAppliedSeq, total)
			}
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
		if err := c.Health(); err != nil {
			t.Errorf("run %d: Health() = %v", run, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run %d: Run returned %v", run, err)
		}
	}
	if got := readCount(t, db, h.minute); got != int64(total) {
		t.Errorf("stored count %d, want %d: some message took effect more or less than once", got, total)
	}
	ckpt, err := ReadCheckpoint(db, "seam")
	if err != nil || ckpt.Seq != uint64(total) || ckpt.Key != "seam" {
		t.Errorf("checkpoint %+v, %v; want seq %d under key seam", ckpt, err, total)
	}
}

// startJetStream starts an embedded NATS server with JetStream (as
// cmd/ingest does) and connects to it; both end with the test.
// openStore opens a store in a temporary directory, closed at the
// test's end.
func openStore(t testing.TB) *storage.DB {
	t.Helper()
	db, err := storage.Open(t.TempDir(), storage.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func startJetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(s) })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// BenchmarkKeepAlive is what every stored batch pays twice for its
// InProgress keep-alive when nothing stalls: start and stop.
func BenchmarkKeepAlive(b *testing.B) {
	c := &Consumer{cfg: Config{AckWait: DefaultAckWait}}
	ds := make([]Delivery, 100)
	b.ReportAllocs()
	for range b.N {
		stop := c.keepAlive(ds)
		stop()
	}
}
