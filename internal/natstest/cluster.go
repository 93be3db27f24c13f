// Package natstest runs real NATS servers inside a test process: one
// embedded JetStream server (StartServer, with Connect for a connection
// and its JetStream context), as most tests of cmd/ingest, cmd/query and
// internal/queryrpc need, and a 3-node JetStream cluster for the tests of
// the scale-out deployment (issue 14): R3 streams and KV buckets, and one
// server stopped and restarted while the others keep the quorum. It is
// real nats-server code, not a mock: each server has its own store
// directory (t.TempDir) and loopback ports for clients and routes.
//
// Use:
//
//	ns := natstest.StartServer(t)
//	nc, js := natstest.Connect(t, ns.ClientURL())
//
//	c := natstest.StartCluster(t)
//	nc, _ := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
//	c.Stop(1) // the others keep a quorum
//	c.Start(1)
//
// The servers and connections are shut down by t.Cleanup.
package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// Size is the number of servers in a Cluster.
const Size = 3

// Cluster is Size clustered nats-servers in this process, JetStream on.
type Cluster struct {
	t       testing.TB
	opts    []*natsserver.Options
	servers []*natsserver.Server
}

// StartCluster starts the servers and returns once each takes client
// connections (a JetStream meta leader may still be being elected).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	var ports []int
	for range 2 * Size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	var routes []string
	for i := range Size {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[Size+i]))
	}
	c := &Cluster{t: t}
	for i := range Size {
		c.opts = append(c.opts, &natsserver.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: ports[i],
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: natsserver.ClusterOpts{Name: "eventide-test", Host: "127.0.0.1", Port: ports[Size+i]},
			Routes:  natsserver.RoutesFromStr(strings.Join(routes, ",")),
		})
		c.servers = append(c.servers, nil)
		c.Start(i)
	}
	t.Cleanup(func() {
		for i := range c.servers {
			c.Stop(i)
		}
	})
	return c
}

// Start starts server i (0 to Size-1) again on its ports and store, and
// returns once it takes client connections.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	s, err := natsserver.NewServer(c.opts[i])
	if err != nil {
		c.t.Fatalf("cannot create nats-server %s: %v", c.opts[i].ServerName, err)
	}
	s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		c.t.Fatalf("%s did not take connections", c.opts[i].ServerName)
	}
	c.servers[i] = s
}

// Stop shuts server i down and waits for it; stopping a stopped server
// does nothing.
func (c *Cluster) Stop(i int) {
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// URLs is every server's client URL, comma-separated, as --nats-url and
// nats.Connect take them.
func (c *Cluster) URLs() string {
	var out []string
	for _, o := range c.opts {
		out = append(out, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(out, ",")
}
