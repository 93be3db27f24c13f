package writer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/cputime"
	"github.com/eventide/eventide/internal/natstest"
	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer/consumer"
)

// BenchmarkHandlerBatch times the writer's share of one stored batch:
// Prepare (validation) and Write (rows, counts) of 1,000 real JetStream
// deliveries of loadtest-like events (20 types, a user, ~200-byte bodies),
// without the storage apply. ns/event and allocs/event are per message.
func BenchmarkHandlerBatch(b *testing.B) {
	const n = 1000
	w, ds := benchDeliveries(b, n)
	ctx := context.Background()
	var sb storage.Batch
	b.ReportAllocs()
	cpu0 := cputime.MustProcess(b.Fatal)
	b.ResetTimer()
	for range b.N {
		eb := w.Prepare(ds, 0)
		if err := eb.Write(ctx, &sb); err != nil {
			b.Fatal(err)
		}
		if got := len(eb.(*eventBatch).events); got != n {
			b.Fatalf("%d events prepared, want %d", got, n)
		}
		sb.Reset()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	// CPU time moves less than wall time with the machine's other load
	// (the embedded NATS server is idle meanwhile).
	b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/event")
}

// benchDeliveries returns a writer and n real JetStream deliveries of
// loadtest-like events for it, fetched from an embedded NATS server.
func benchDeliveries(b *testing.B, n int) (*Writer, []consumer.Delivery) {
	b.Helper()
	s := startNATS(b, b.TempDir(), -1)
	nc := connect(b, s.ClientURL())
	db := openDB(b, b.TempDir())
	w := newWriter(b, nc, db, Config{})
	js := jsFor(b, nc)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	pad := strings.Repeat("x", 120)
	for i := range n {
		body := fmt.Sprintf(`{"time":%d,"user":"u%d","data":{"seq":%d,"pad":"%s"}}`, now-int64(i%50), i%10007, i, pad)
		if _, err := js.Publish(ctx, fmt.Sprintf("events.bench-t%02d", i%20), []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, DefaultStream, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		b.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	var ds []consumer.Delivery
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, consumer.Delivery{Msg: m, Seq: md.Sequence.Stream, Time: md.Timestamp})
	}
	if len(ds) != n {
		b.Fatalf("fetched %d messages, want %d", len(ds), n)
	}
	return w, ds
}

// BenchmarkBatchStored times a stored batch's bookkeeping (counts by type
// into the metrics; no OnStored), per event of a 1,000-event batch of 20
// types.
func BenchmarkBatchStored(b *testing.B) {
	const n = 1000
	w, ds := benchDeliveries(b, n)
	eb := w.Prepare(ds, 0)
	var sb storage.Batch
	if err := eb.Write(context.Background(), &sb); err != nil { // marks the events stored
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		eb.Stored()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkParseEvent times the validation of one loadtest-like body
// (~200 bytes: time, user, data with a padding string), the per-event
// part of Prepare.
func BenchmarkParseEvent(b *testing.B) {
	v := parseTestValidator(b)
	body := []byte(fmt.Sprintf(`{"time":%d,"user":"u4242","data":{"seq":123456,"pad":"%s"}}`,
		parseTestNow.Add(-time.Minute).UnixMilli(), strings.Repeat("x", 140)))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cputime.MustProcess(b.Fatal)
	for b.Loop() {
		if _, rej := v.parse("events.click", body, msgIdentity{stream: DefaultStream, seq: 1}, parseTestNow); rej != nil {
			b.Fatal(rej)
		}
	}
	// CPU time moves less than wall time with the machine's other load.
	b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkBatchFixedCost times what one stored batch costs the process
// beyond its events: a publisher sends one event at a time (over TCP,
// waiting for the JetStream ack) and, with the writer running on an
// in-process connection as cmd/ingest wires it, waits until the writer
// has stored and acked it, so every batch holds one event. "publish" is
// the same publishing with no writer: the difference is the writer's
// fetch, validation, storage apply with its WAL fsync, ack and stored
// hook for a batch. cpu-us/op is the whole process's CPU (embedded server
// included); it is what a batch costs however many events it holds, and
// why CPU per event falls as batches grow with the rate.
func BenchmarkBatchFixedCost(b *testing.B) {
	for _, withWriter := range []bool{false, true} {
		name := "publish"
		if withWriter {
			name = "publish+store"
		}
		b.Run(name, func(b *testing.B) {
			pub, wnc, db := benchServerWriterConn(b)
			stored := make(chan struct{}, 1)
			w := newWriter(b, wnc, db, Config{OnStored: func([]StoredEvent) {
				select {
				case stored <- struct{}{}:
				default:
				}
			}})
			if withWriter {
				runWriter(b, w)
			}
			js := jsFor(b, pub)
			ctx := context.Background()
			body := []byte(fmt.Sprintf(`{"time":%d,"user":"u1","data":{"pad":"%s"}}`, time.Now().UnixMilli(), strings.Repeat("x", 150)))
			// A first event, so that every timed batch finds the writer
			// warm.
			if _, err := js.Publish(ctx, "events.bench", body); err != nil {
				b.Fatal(err)
			}
			if withWriter {
				<-stored
			}
			cpu0 := cputime.MustProcess(b.Fatal)
			b.ResetTimer()
			for range b.N {
				if _, err := js.Publish(ctx, "events.bench", body); err != nil {
					b.Fatal(err)
				}
				if withWriter {
					select {
					case <-stored:
					case <-time.After(30 * time.Second):
						b.Fatal("the event was not stored within 30s")
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// BenchmarkWriterAtRate is the ingest path at a steady rate, as the
// all-in-one runs it: a publisher on a TCP connection sends rate
// loadtest-like events a second (20 types, ~200-byte bodies; core NATS
// publishes into the stream, spread over each millisecond), and the
// writer, on an in-process connection, fetches, validates, stores (WAL
// fsync included) and acks them. cpu-ns/event is the whole process's CPU
// (embedded server and publisher included) per event stored, events/batch
// the writer's mean batch, p50-ms and p99-ms the time from an event's
// publish to its batch being stored (its stream sequence is its place in
// the one publisher's order). With -cpu 2,4 the same runs with more Go Ps
// than this machine's cores. The sub-benchmarks differ in FetchLinger: under
// load a batch holds what arrives within it, so a longer linger means
// fewer batches (each with its pull, fsync, ack, checkpoint and counter
// cells) for up to that much more publish-to-queryable latency.
func BenchmarkWriterAtRate(b *testing.B) {
	const rate = 40000
	for _, linger := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond} {
		b.Run("linger-"+linger.String(), func(b *testing.B) {
			pub, wnc, db := benchServerWriterConn(b)
			var stored, batches atomic.Int64
			// sentAt[i] is when message i+1 of the stream was published
			// (unix nanos); lat collects publish-to-stored while measuring.
			maxEvents := rate + b.N + rate
			sentAt := make([]atomic.Int64, maxEvents)
			var latMu sync.Mutex
			var lat []time.Duration
			var measuring atomic.Bool
			w := newWriter(b, wnc, db, Config{FetchLinger: linger, OnStored: func(evs []StoredEvent) {
				now := time.Now().UnixNano()
				latMu.Lock()
				defer latMu.Unlock()
				if measuring.Load() {
					for _, ev := range evs {
						if i := int(ev.Seq) - 1; i < len(sentAt) {
							lat = append(lat, time.Duration(now-sentAt[i].Load()))
						}
					}
				}
				stored.Add(int64(len(evs)))
				batches.Add(1)
			}})
			runWriter(b, w)
			now := time.Now().UnixMilli()
			pad := strings.Repeat("x", 120)
			type msg struct {
				subject string
				body    []byte
			}
			msgs := make([]msg, 1000)
			for i := range msgs {
				msgs[i] = msg{fmt.Sprintf("events.bench-t%02d", i%20),
					fmt.Appendf(nil, `{"time":%d,"user":"u%d","data":{"seq":%d,"pad":"%s"}}`, now, i%997, i, pad)}
			}
			ctx, cancel := context.WithCancel(context.Background())
			published := natstest.PublishPaced(ctx, rate, maxEvents, func(i int) error {
				m := msgs[i%len(msgs)]
				sentAt[i].Store(time.Now().UnixNano())
				return pub.Publish(m.subject, m.body)
			})
			defer func() {
				cancel()
				<-published
			}()
			// Warm: the first second's events stored.
			wait := func(n int64) {
				deadline := time.Now().Add(time.Minute)
				for stored.Load() < n {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d events stored within a minute", stored.Load(), n)
					}
					time.Sleep(time.Millisecond) // polling the writer's count, with a deadline
				}
			}
			wait(rate)
			measuring.Store(true)
			n0, batches0, cpu0 := stored.Load(), batches.Load(), cputime.MustProcess(b.Fatal)
			b.ResetTimer()
			wait(n0 + int64(b.N))
			b.StopTimer()
			measuring.Store(false)
			n, nb := stored.Load()-n0, batches.Load()-batches0
			latMu.Lock()
			defer latMu.Unlock()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(float64((cputime.MustProcess(b.Fatal)-cpu0).Nanoseconds())/float64(n), "cpu-ns/event")
			b.ReportMetric(float64(n)/float64(max(nb, 1)), "events/batch")
		})
	}
}

// benchServerWriterConn starts an embedded NATS server and returns a
// publisher's connection over TCP, the writer's in-process connection (as
// cmd/ingest has it) and a store: the setup of the benchmarks that publish
// while a writer stores.
func benchServerWriterConn(b *testing.B) (pub, writerConn *nats.Conn, db *storage.DB) {
	b.Helper()
	s := startNATS(b, b.TempDir(), -1)
	pub = connect(b, s.ClientURL())
	writerConn, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(writerConn.Close)
	return pub, writerConn, openDB(b, b.TempDir())
}
