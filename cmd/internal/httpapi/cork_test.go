//go:build linux

package httpapi

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
)

func corkState(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK)
	}); err != nil || serr != nil {
		t.Fatalf("cannot read TCP_CORK: %v %v", err, serr)
	}
	return v
}

// TestWriteCorked: a large answer is written with the connection corked
// and leaves it uncorked (else the kernel would hold the next answer's
// start for its 200 ms); a small one, or one on a server that does not
// give the handlers its connections, is written uncorked; every body
// arrives whole, over one kept-alive connection.
func TestWriteCorked(t *testing.T) {
	large := bytes.Repeat([]byte("x"), 15000)
	small := []byte(`{"events":[]}`)
	for _, withConn := range []bool{true, false} {
		var conn net.Conn
		var corkedDuring int
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := small
			if r.URL.Path == "/large" {
				body = large
			}
			conn, _ = r.Context().Value(connKey{}).(net.Conn)
			corkedDuring = -1
			if uncork := cork(r); uncork != nil {
				corkedDuring = corkState(t, conn)
				uncork()
			}
			writeCorked(w, r, body)
		}))
		if withConn {
			srv.Config.ConnContext = ConnContext
		}
		srv.Start()
		client := srv.Client()
		for _, path := range []string{"/large", "/small", "/large"} {
			resp, err := client.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := small
			if path == "/large" {
				want = large
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("withConn %v %s: read %d bytes (%v), want %d", withConn, path, len(got), err, len(want))
			}
			if !withConn {
				if conn != nil || corkedDuring != -1 {
					t.Fatalf("without ConnContext: the handler saw a connection or corked it")
				}
				continue
			}
			if corkedDuring != 1 {
				t.Errorf("%s: TCP_CORK %d while corked, want 1", path, corkedDuring)
			}
			if s := corkState(t, conn); s != 0 {
				t.Errorf("%s: TCP_CORK %d after the answer, want 0", path, s)
			}
		}
		srv.Close()
	}
}

// BenchmarkWriteCorked: 15 KB answers (a latest-50 page) over loopback
// keep-alive connections, the client in the same process: cpu-ns/op is
// the process's CPU (server and client, user and kernel) per request,
// written plainly (two write calls) and corked (one send).
func BenchmarkWriteCorked(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 15000)
	for _, corked := range []bool{false, true} {
		name := "plain"
		if corked {
			name = "corked"
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				if corked {
					writeCorked(w, r, body)
				} else {
					w.Write(body)
				}
			}))
			srv.Config.ConnContext = ConnContext
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
