package httpapi

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// heldRecorder records, after each Write through it, how many bytes the
// connection holds (-1: not held).
type heldRecorder struct {
	http.ResponseWriter
	c    *holdingConn
	held int
}

func (h *heldRecorder) Write(p []byte) (int, error) {
	n, err := h.ResponseWriter.Write(p)
	h.held = -1
	if h.c.held != nil {
		h.held = len(*h.c.held)
	}
	return n, err
}

func (h *heldRecorder) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// TestWriteOnce: on a server with HoldingListener and ConnContext, a
// large answer is held whole (headers and body) while net/http writes it
// and sent when writeOnce returns, which leaves the connection unheld; a
// small one is not held; without the two, answers are written as before.
// Every body arrives whole, over one kept-alive connection.
func TestWriteOnce(t *testing.T) {
	large := bytes.Repeat([]byte("x"), 15000)
	small := []byte(`{"events":[]}`)
	for _, holding := range []bool{true, false} {
		type seen struct {
			holdingConn      bool
			heldInWrite      int
			heldAfter, calls int
		}
		got := make(chan seen, 1)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := small
			if r.URL.Path == "/large" {
				body = large
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			c, ok := r.Context().Value(connKey{}).(*holdingConn)
			if !ok {
				writeOnce(w, r, body)
				got <- seen{}
				return
			}
			rec := &heldRecorder{ResponseWriter: w, c: c}
			writeOnce(rec, r, body)
			s := seen{holdingConn: true, heldInWrite: rec.held, heldAfter: -1}
			if c.held != nil {
				s.heldAfter = len(*c.held)
			}
			got <- s
		}))
		if holding {
			srv.Listener = HoldingListener(srv.Listener)
			srv.Config.ConnContext = ConnContext
		}
		srv.Start()
		client := srv.Client()
		// Held bytes never sent would leave the client waiting.
		client.Timeout = 10 * time.Second
		for _, path := range []string{"/large", "/small", "/large"} {
			resp, err := client.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := small
			if path == "/large" {
				want = large
			}
			if err != nil || !bytes.Equal(body, want) {
				t.Fatalf("holding %v %s: read %d bytes (%v), want %d", holding, path, len(body), err, len(want))
			}
			s := <-got
			switch {
			case !holding:
				if s.holdingConn {
					t.Fatalf("without the listener and ConnContext: the handler saw a holding connection")
				}
			case path == "/large" && s.heldInWrite < len(large):
				t.Errorf("%s: %d bytes held after the body's write, want the headers and all %d of the body", path, s.heldInWrite, len(large))
			case path == "/small" && s.heldInWrite != -1:
				t.Errorf("%s: held (%d bytes) though small", path, s.heldInWrite)
			}
			if holding && s.heldAfter != -1 {
				t.Errorf("%s: still holding %d bytes after the answer", path, s.heldAfter)
			}
		}
		// HEAD: the headers alone, then the connection serves on.
		for range 2 {
			req, _ := http.NewRequest(http.MethodHead, srv.URL+"/large", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			<-got
			if resp.ContentLength != int64(len(large)) {
				t.Errorf("holding %v: HEAD Content-Length %d, want %d", holding, resp.ContentLength, len(large))
			}
		}
		srv.Close()
	}
}

// TestHoldingConnReadFrom: a body copied from a reader into a held
// connection follows what was held.
func TestHoldingConnReadFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hl := HoldingListener(ln)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc, err := hl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := sc.(*holdingConn)
	c.hold()
	c.Write([]byte("held,"))
	if _, err := c.ReadFrom(strings.NewReader("copied")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "held,copied" {
		t.Fatalf("read %q (%v), want %q", got, err, "held,copied")
	}
}

// BenchmarkSendOnce: 15 KB answers (a latest-50 page) over loopback
// keep-alive connections, the client in the same process: cpu-ns/op is
// the process's CPU (server and client, user and kernel) per request,
// written plainly (two write calls) and held (one).
func BenchmarkSendOnce(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 15000)
	for _, holding := range []bool{false, true} {
		name := "plain"
		if holding {
			name = "held"
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				writeOnce(w, r, body)
			}))
			if holding {
				srv.Listener = HoldingListener(srv.Listener)
				srv.Config.ConnContext = ConnContext
			}
			srv.Start()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
			defer client.CloseIdleConnections()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(srv.URL)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
