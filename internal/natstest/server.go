package natstest

import (
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventide/eventide/internal/natsembed"
)

// StartServer starts one embedded NATS server with JetStream (package
// natsembed, as cmd/ingest runs it) on a free loopback port, its store in
// t.TempDir(); t.Cleanup stops it.
func StartServer(t testing.TB) *natsserver.Server {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsembed.Stop(ns) })
	return ns
}

// Connect connects to the NATS server at url with opts; t.Cleanup closes
// the connection. It returns the connection and its JetStream context. The
// connection is still open when the test's defers run: a test that checks
// for leaked goroutines in a defer closes it first.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
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

// AwaitAcks waits for JetStream's ack of each published message, at most
// 30s for each; a missing or failed ack fails t.
func AwaitAcks(t testing.TB, futures []jetstream.PubAckFuture) {
	t.Helper()
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("no publish ack within 30s")
		}
	}
}
