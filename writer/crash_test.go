package writer

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/storage"
	"github.com/eventide/eventide/writer/consumer"
)

var crashCycles = flag.Int("crash.cycles", 8, "kill and restart cycles in TestCrash (at least 3)")

// Environment of the writer child process of TestCrash.
const (
	envCrashChild = "EVENTIDE_WRITER_CRASH_CHILD"
	envCrashNATS  = "EVENTIDE_WRITER_CRASH_NATS"
	envCrashDir   = "EVENTIDE_WRITER_CRASH_DIR"
)

// TestHelperProcessWriter is the child of TestCrash: a writer process
// against the parent's NATS server, storing in its own directory, until it
// is killed (or, on SIGTERM, shuts down cleanly).
func TestHelperProcessWriter(t *testing.T) {
	if os.Getenv(envCrashChild) != "1" {
		t.Skip("the writer process of TestCrash")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "crash child: "+format+"\n", args...)
		os.Exit(3)
	}
	nc, err := nats.Connect(os.Getenv(envCrashNATS), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		fail("cannot connect: %v", err)
	}
	db, err := storage.Open(os.Getenv(envCrashDir), storage.DefaultOptions())
	if err != nil {
		fail("cannot open storage: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := New(ctx, nc, db, crashConfig(t, logger))
	if err != nil {
		fail("%v", err)
	}
	if err := w.Run(ctx); err != nil {
		fail("Run: %v", err)
	}
	if err := db.Close(); err != nil {
		fail("close storage: %v", err)
	}
	nc.Close()
	os.Exit(0)
}

// crashConfig is the writer configuration of TestCrash. Interest
// retention deletes a message from the stream once it is acked, so an ack
// sent before its message was durable would lose it for good.
func crashConfig(t testing.TB, logger *slog.Logger) Config {
	return Config{Types: testTypes(t), FetchBatch: 100, Retention: "interest", Logger: logger}
}

// crashChild is a running writer process.
type crashChild struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
}

// lockedBuffer is the child's stderr, written by exec's copying goroutine
// while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startCrashChild(t *testing.T, natsURL, dir string) *crashChild {
	t.Helper()
	c := &crashChild{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperProcessWriter$", "-test.count=1")}
	c.cmd.Env = append(os.Environ(), envCrashChild+"=1", envCrashNATS+"="+natsURL, envCrashDir+"="+dir)
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("cannot start the writer process: %v", err)
	}
	return c
}

// kill SIGKILLs the child and checks it had not died by itself.
func (c *crashChild) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatalf("cannot kill the writer process: %v", err)
	}
	err := c.cmd.Wait()
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the writer process ended by itself (%v) before it was killed; its stderr:\n%s", err, c.stderr.String())
	}
}

// TestCrash SIGKILLs a writer process at random moments while events are
// published, restarting it each time; at the end every published event is
// stored exactly once and every count is exact.
func TestCrash(t *testing.T) {
	cycles := max(*crashCycles, 3)
	rng := newRand(t)
	s := startNATS(t, t.TempDir(), -1)
	url := s.ClientURL()
	nc := connect(t, url)
	js := jsFor(t, nc)
	// Create the streams and the consumer as the child will find them.
	newWriter(t, nc, openDB(t, t.TempDir()), crashConfig(t, testLogger()))
	cons, err := js.Consumer(context.Background(), DefaultStream, DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	consumerInfo := func() *jetstream.ConsumerInfo {
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info
	}

	pool := 200_000
	evs := genEvents(rng, 0, pool, testEventTypes, time.Now().Add(-2*time.Hour), 2*time.Hour-time.Minute)
	p := startPublisher(js, evs, 100, 2*time.Millisecond)
	dir := t.TempDir()
	for cycle := range cycles {
		child := startCrashChild(t, url, dir)
		// Kill once it has stored a random amount more, and then at a
		// random moment: mid-fetch, mid-apply or mid-ack.
		floor := consumerInfo().AckFloor.Stream
		target := floor + 1 + uint64(rng.IntN(4000))
		waitFor(t, 30*time.Second, func() bool { return consumerInfo().AckFloor.Stream >= target },
			func() string {
				return fmt.Sprintf("cycle %d: the writer did not get past %d; stderr:\n%s", cycle, target, child.stderr.String())
			})
		time.Sleep(time.Duration(rng.IntN(20_000)) * time.Microsecond) // a random moment, not a wait for work
		child.kill(t)
		t.Logf("cycle %d: killed at ack floor >= %d, %d events published so far", cycle, target, p.count())
	}
	p.stop()
	published := p.wait(t)

	child := startCrashChild(t, url, dir)
	last := streamLastSeq(t, js, DefaultStream)
	waitFor(t, 60*time.Second, func() bool {
		info := consumerInfo()
		return info.AckFloor.Stream == last && info.NumAckPending == 0
	}, func() string {
		return fmt.Sprintf("the writer did not catch up with sequence %d: %+v; stderr:\n%s", last, consumerInfo().AckFloor, child.stderr.String())
	})
	child.kill(t)
	if last != uint64(len(published)) {
		t.Fatalf("stream holds %d messages, the publisher published %d", last, len(published))
	}
	db := openDB(t, dir)
	checkStoredExactlyOnce(t, db, testTypes(t), published)
	if ckpt, err := consumer.ReadCheckpoint(db, DefaultConsumer); err != nil || ckpt.Seq != last {
		t.Errorf("checkpoint = %+v, %v; want %d", ckpt, err, last)
	}
	if err := db.Check(); err != nil {
		t.Errorf("storage check: %v", err)
	}
}
