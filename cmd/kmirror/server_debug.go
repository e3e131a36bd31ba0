package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// serveDebug serves Go's runtime profiles (/debug/pprof/) on addr until ctx
// ends. The profiles show the process's internals and have no token, so
// addr must be a loopback address (reach it with kubectl port-forward or
// ssh). It returns once addr listens; the func it returns waits for the
// server to close.
func serveDebug(ctx context.Context, addr string, log *slog.Logger) (func(), error) {
	if !loopback(addr) {
		return nil, fmt.Errorf("--debug-listen %s: the profiles have no token, so only a loopback address (127.0.0.1:6060) is allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug listener stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close() // a profile being taken is cut: the process is stopping
	}()
	log.Info("serving Go profiles", "debug_listen", ln.Addr().String())
	return func() { <-done }, nil
}
