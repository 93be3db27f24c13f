// Package natsembed starts the NATS server with JetStream that Eventide
// embeds: the one cmd/ingest runs by default (its store in <data>/nats),
// the one loadtest/ingestbench measures against, and the one tests start
// instead of a mock. It owns the server's options (JetStream on, the
// command's signals left alone, a free port for port 0), the check that
// the listen address is free before start, the wait until the server takes
// connections with JetStream enabled, and the adapter from the server's
// logger to slog.
//
// It owns nothing after start: streams and consumers belong to package
// writer, the connection to whoever calls nats.Connect. StreamsHealth says
// when a stream of the server failed in a way only a restart clears;
// Interest tells a publisher whether anything subscribes to a subject.
//
// Use:
//
//	ns, err := natsembed.Start(natsembed.Config{Listen: "127.0.0.1:0", StoreDir: dir})
//	if err != nil { ... }
//	defer natsembed.Stop(ns)
//	nc, err := nats.Connect(ns.ClientURL()) // or nats.InProcessServer(ns)
package natsembed

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// SyncInterval is how often the embedded server fsyncs its JetStream store:
// nats-server's own default, set here so the choice is explicit. An
// acknowledged publish survives a process crash (the page cache keeps it)
// but not power loss or a kernel crash within the interval, unless the
// writer had stored it already (its WAL is fsynced before it acks).
// "always" (fsync every write) cost 77x in publish throughput on one R1
// server (368k to 4.8k msg/s); deploy/'s 3-node cluster uses it, where it
// costs far less (deploy/README.md, "Durability").
const SyncInterval = 2 * time.Minute

// Config configures the embedded NATS server.
type Config struct {
	// Listen is the host:port of the client listener. Port 0 picks a free
	// port (read it back from Server.ClientURL).
	Listen string
	// StoreDir holds the JetStream store.
	StoreDir string
	// Logger receives the server's messages: its notices at debug level
	// (they repeat what Eventide's banner says), warnings and errors as
	// such. Defaults to discarding.
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the listener. Default 10s.
	ReadyTimeout time.Duration
}

// Start starts a NATS server with JetStream in this process and waits
// until it accepts connections. Stop it with Shutdown and
// WaitForShutdown. Clients in the same process can connect without TCP
// with nats.InProcessServer.
func Start(cfg Config) (*natsserver.Server, error) {
	host, portText, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cannot start embedded NATS: listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("cannot start embedded NATS: listen address %q: port %q is not a number in 0..65535", cfg.Listen, portText)
	}
	if port == 0 {
		port = natsserver.RANDOM_PORT // nats-server reads 0 as its default, 4222
	} else {
		// nats-server reports a port in use only in its log; probe first so
		// the common mistake fails at once with the reason.
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("cannot start embedded NATS: %w (is another NATS server running? pick another address)", err)
		}
		ln.Close()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	ns, err := natsserver.NewServer(&natsserver.Options{
		ServerName:   "eventide",
		Host:         host,
		Port:         port,
		JetStream:    true,
		StoreDir:     cfg.StoreDir,
		SyncInterval: SyncInterval,
		NoSigs:       true, // the command owns signals
	})
	if err != nil {
		return nil, fmt.Errorf("cannot start embedded NATS: %w", err)
	}
	logger := cfg.Logger.With("component", "nats-server")
	ns.SetLoggerV2(natsLogger{logger}, logger.Enabled(context.Background(), slog.LevelDebug), false, false)
	ns.Start()
	if !ns.ReadyForConnections(cfg.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS did not accept connections on %s within %s (is the port in use? the log says more)", cfg.Listen, cfg.ReadyTimeout)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS started without JetStream (store %s); the log says why", cfg.StoreDir)
	}
	return ns, nil
}

// Stop shuts ns down and waits until it has.
func Stop(ns *natsserver.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}

// Interest returns a function reporting whether any subscription of the
// server's global account (the embedded server's only one: it has no
// authentication) matches subject, wildcards included. A publisher in the
// same process uses it to skip building messages nobody would receive; it
// reads the server's subscription list under a read lock, so call it per
// batch rather than per message.
func Interest(ns *natsserver.Server) func(subject string) bool {
	acc := ns.GlobalAccount()
	return acc.SubscriptionInterest
}

// natsLogger adapts slog to nats-server's Logger.
type natsLogger struct{ l *slog.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn(fmt.Sprintf(format, v...)) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Tracef(format string, v ...any)  {}

// Fatalf: nats-server's own logger exits the process here; embedded, the
// failure surfaces as a server that is not ready or not running.
func (n natsLogger) Fatalf(format string, v ...any) {
	n.l.Error(fmt.Sprintf(format, v...), "fatal", true)
}

// StreamsHealth returns an error naming every JetStream stream of ns that
// the server reports broken: one it could not recover, or one with a write
// error. nats-server keeps a stream's write error (a full disk, for
// example) until it restarts: the stream refuses every message even after
// space is back, so a process embedding ns can recover only by restarting,
// and this belongs in its liveness check. It returns nil while ns is not
// running or not yet taking connections (starting or shutting down), which
// are no stream's fault.
func StreamsHealth(ns *natsserver.Server) error {
	if !ns.Running() {
		return nil
	}
	st := ns.Healthz(&natsserver.HealthzOptions{Details: true})
	var broken []string
	for _, e := range st.Errors {
		if e.Type == natsserver.HealthzErrorStream {
			broken = append(broken, e.Error)
		}
	}
	if len(broken) == 0 {
		return nil
	}
	return fmt.Errorf("embedded NATS: %s; it clears only when the process restarts", strings.Join(broken, "; "))
}
