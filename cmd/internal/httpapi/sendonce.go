package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
)

// Large answers in one write. net/http buffers a connection's writes in
// 4 KiB, so an answer past that (a latest-50 page is about 15 KB) left in
// two write calls, the buffer with the headers and then the rest: on a
// loopback or LAN connection, two sends and receives for both kernels and
// two wake-ups of the client. A server whose listener is HoldingListener
// and whose ConnContext is ConnContext lets writeBody hold the
// connection's writes while net/http writes and flushes the answer, then
// send them in one write call. BenchmarkSendOnce (15 KB answers over
// loopback, client and server in one process) spends about 35 µs of CPU
// per request plainly and 29 held; setting the connection's TCP_CORK
// around the write instead (the kernel joins the sends, for two more
// system calls) came to about 31 (BENCHMARKS.md, session s12-split).
//
// Without the two, or on a connection that is not TCP, answers are
// written as before.

// connKey is the request context's key of the connection (ConnContext).
type connKey struct{}

// ConnContext is an http.Server's ConnContext that hands the API's
// handlers their connection, so that a large answer leaves in one write
// (with HoldingListener).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// HoldingListener wraps a TCP listener's connections so that the API can
// send a large answer in one write (with ConnContext). Connections of
// another kind pass through unwrapped.
func HoldingListener(ln net.Listener) net.Listener { return holdingListener{ln} }

type holdingListener struct{ net.Listener }

func (l holdingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		return &holdingConn{TCPConn: tc}, nil
	}
	return c, err
}

// holdingConn gathers its writes in a buffer while held; release sends
// them. It is used by one goroutine at a time, as net/http writes an
// HTTP/1 connection from the goroutine serving it (the handler's).
type holdingConn struct {
	*net.TCPConn
	held *[]byte // the writes held; nil: not held
}

// holdBuffers recycle the held writes' buffers, so an idle connection
// keeps none.
var holdBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// maxHoldBuffer is the largest buffer put back in holdBuffers.
const maxHoldBuffer = 1 << 20

func (c *holdingConn) Write(p []byte) (int, error) {
	if c.held != nil {
		*c.held = append(*c.held, p...)
		return len(p), nil
	}
	return c.TCPConn.Write(p)
}

// ReadFrom sends what is held first: net/http copies a body from a
// reader (io.Copy into the ResponseWriter) straight into the connection.
func (c *holdingConn) ReadFrom(r io.Reader) (int64, error) {
	if err := c.release(); err != nil {
		return 0, err
	}
	return c.TCPConn.ReadFrom(r)
}

func (c *holdingConn) hold() {
	if c.held == nil {
		c.held = holdBuffers.Get().(*[]byte)
	}
}

// release sends what is held, in one write, and stops holding.
func (c *holdingConn) release() error {
	b := c.held
	if b == nil {
		return nil
	}
	c.held = nil
	var err error
	if len(*b) > 0 {
		_, err = c.TCPConn.Write(*b)
	}
	if cap(*b) <= maxHoldBuffer {
		*b = (*b)[:0]
		holdBuffers.Put(b)
	}
	return err
}

// holdMinBody is the least body worth holding: below it, the headers and
// body leave in one write anyway (after the handler returns).
const holdMinBody = 3 << 10

// writeOnce writes body to w, as one write on the connection when the
// server allows it (see above) and the body is large.
func writeOnce(w http.ResponseWriter, r *http.Request, body []byte) {
	c, ok := r.Context().Value(connKey{}).(*holdingConn)
	if !ok || len(body) < holdMinBody {
		w.Write(body)
		return
	}
	c.hold()
	// A write error reaches net/http with the next read or write on the
	// connection, as one of its own would: the client has gone. Should
	// the flush not reach the connection (a wrapper without Unwrap), what
	// net/http still buffers follows what is held: the order holds.
	defer c.release()
	w.Write(body)
	http.NewResponseController(w).Flush()
}
