package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestDebugListenServesProfilesOnLoopbackOnly: the profiles have no token,
// so an address other hosts reach is refused, and a loopback one serves
// the pprof index until its context ends.
func TestDebugListenServesProfilesOnLoopbackOnly(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":0", "example.com:6060"} {
		if _, err := serveDebug(context.Background(), addr, log); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("serveDebug(%q) = %v, want a refusal that names loopback", addr, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	closed, err := serveDebug(ctx, addr, log)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/: %d %.200s", resp.StatusCode, body)
	}
	cancel()
	closed()
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Fatal("the debug listener still answers after its context ended")
	}
}
