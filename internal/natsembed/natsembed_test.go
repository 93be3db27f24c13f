package natsembed

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

func TestStart(t *testing.T) {
	ns, err := Start(Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer Stop(ns)
	if strings.HasSuffix(ns.ClientURL(), ":4222") {
		t.Fatalf("port 0 listened on the default port: %s", ns.ClientURL())
	}
	// Over TCP, with JetStream.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("hi")); err != nil {
		t.Fatal(err)
	}

	// A second server on the same port fails with a message that says why.
	_, err = Start(Config{Listen: ns.Addr().String(), StoreDir: t.TempDir(), ReadyTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second server on %s: err %v, want a port-in-use error", ns.Addr(), err)
	}
}

func TestStartBadListen(t *testing.T) {
	for _, listen := range []string{"localhost", "127.0.0.1:x", "127.0.0.1:70000"} {
		if _, err := Start(Config{Listen: listen, StoreDir: t.TempDir()}); err == nil {
			t.Errorf("listen %q: no error", listen)
		}
	}
}

// TestStoreCollector: eventide_nats_store_bytes is the size of the store's
// files, and grows as a stream stores messages.
func TestStoreCollector(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	ns, err := Start(Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer Stop(ns)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewStoreCollector(dir))
	storeBytes := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 || mfs[0].GetName() != "eventide_nats_store_bytes" {
			t.Fatalf("gather: %v %v", mfs, err)
		}
		return mfs[0].GetMetric()[0].GetGauge().GetValue()
	}
	before := storeBytes()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 64<<10)
	for range 4 {
		if _, err := js.Publish(t.Context(), "t.x", body); err != nil {
			t.Fatal(err)
		}
	}
	// The server writes message blocks behind its acks: poll.
	for deadline := time.Now().Add(10 * time.Second); storeBytes() < before+4*64<<10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("store bytes %v before, %v 10s after 256 KiB of messages", before, storeBytes())
		}
	}
	want, err := dirBytes(dir)
	if err != nil || want <= 0 {
		t.Fatalf("dirBytes: %d, %v", want, err)
	}
}

// TestSyncInterval: the embedded server runs with the interval the README
// and deploy/README.md document, not "always".
func TestSyncInterval(t *testing.T) {
	ns, err := Start(Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer Stop(ns)
	jsc := ns.JetStreamConfig()
	if jsc == nil || jsc.SyncInterval != SyncInterval || jsc.SyncAlways {
		t.Fatalf("JetStream config %+v, want sync interval %s and not always", jsc, SyncInterval)
	}
}
