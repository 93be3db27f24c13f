package httpapi

import (
	"context"
	"net"
	"net/http"
	"syscall"
)

// Large answers in one TCP send. net/http buffers a connection's writes in
// 4 KiB, so an answer past that (a latest-50 page is about 15 KB) leaves
// in two write calls, the buffer with the headers and then the rest, and
// on a loopback or LAN connection each is a send and a receive for both
// kernels and a wake-up of the client. With the connection's TCP_CORK set
// around the body's write, the kernel sends the two as one:
// BenchmarkWriteCorked (15 KB answers over loopback) spends about 34 µs of
// CPU per request plainly and 30 corked, client and server together
// (BENCHMARKS.md, session s12-split).
//
// The server must hand the connection to the handlers: ConnContext as its
// http.Server.ConnContext. Without it, or on a connection that is not
// TCP (TLS, a Unix socket) or a system without TCP_CORK, answers are
// written as before.

// connKey is the request context's key of the connection (ConnContext).
type connKey struct{}

// ConnContext is an http.Server's ConnContext that lets the API send a
// large answer in one TCP send (cork.go).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// corkMinBody is the least body worth corking: below it, the headers and
// body leave in one write anyway (after the handler returns), and the
// two setsockopt calls would be spent for nothing.
const corkMinBody = 3 << 10

// cork sets TCP_CORK on r's connection, when the server gave it
// (ConnContext) and it is TCP, and returns the function that clears it,
// sending what the kernel held; nil when it could not set it.
func cork(r *http.Request) (uncork func()) {
	c, ok := r.Context().Value(connKey{}).(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil || setCork(rc, true) != nil {
		return nil
	}
	return func() { setCork(rc, false) }
}

// writeCorked writes body to w, corked when it is large (see above).
func writeCorked(w http.ResponseWriter, r *http.Request, body []byte) {
	if len(body) >= corkMinBody {
		if uncork := cork(r); uncork != nil {
			defer uncork()
		}
	}
	w.Write(body)
}

// setCork sets or clears TCP_CORK on the socket of rc.
func setCork(rc syscall.RawConn, on bool) error {
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setsockoptCork(fd, on) }); err != nil {
		return err
	}
	return serr
}
