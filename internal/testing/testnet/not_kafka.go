package testnet

import (
	"crypto/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// NotKafka starts, on loopback, one of each thing that may be at an
// address where a Kafka broker was expected, and returns their addresses
// by name: a closed port, a host that holds connections and never answers
// (a Blackhole), a web server, a database (answering as PostgreSQL does to
// a startup packet it does not know) and a server that answers with noise.
// tb's cleanup stops them.
func NotKafka(tb testing.TB) map[string]string {
	tb.Helper()
	return map[string]string{
		"closed port": closedPort(tb),
		"no answer":   NewBlackhole(tb).Addr(),
		"web server":  webServer(tb),
		"database": answering(tb, func(c net.Conn) {
			msg := "SFATAL\x00VFATAL\x00C08P01\x00Minvalid length of startup packet\x00\x00"
			_, _ = c.Write(append([]byte{'E', 0, 0, 0, byte(4 + len(msg))}, msg...))
		}),
		"noise": answering(tb, func(c net.Conn) {
			noise := make([]byte, 64)
			_, _ = rand.Read(noise)
			_, _ = c.Write(noise)
		}),
	}
}

// closedPort is a port that was free a moment ago: dials are refused.
func closedPort(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func webServer(tb testing.TB) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	}))
	tb.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// answering accepts connections, reads what a client sends first, answers
// and closes.
func answering(tb testing.TB, answer func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Read(make([]byte, 512))
				answer(c)
			}()
		}
	}()
	return ln.Addr().String()
}
