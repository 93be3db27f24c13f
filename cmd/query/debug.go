package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugServer serves Go's profiles (--pprof) on a listener of its own, so
// the API's token, CORS and metrics never see them and they can stay on a
// loopback or operators' address while the API is public.
type debugServer struct {
	ln  net.Listener
	srv *http.Server
}

func startDebugServer(addr string, logger *slog.Logger) (*debugServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for profiles (--pprof): %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	d := &debugServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}}
	go func() {
		if err := d.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("profile server stopped", "err", err)
		}
	}()
	logger.Info("serving Go profiles", "pprof", ln.Addr().String())
	return d, nil
}

// close stops the listener and any profile being taken.
func (d *debugServer) close() error { return d.srv.Close() }
