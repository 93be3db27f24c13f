package natsembed

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
