// Package testnet has network stand-ins for tests.
package testnet

import (
	"net"
	"sync"
	"testing"
)

// Blackhole accepts TCP connections on loopback and never answers: a Kafka
// broker or a Postgres server that times out rather than refusing. Its
// connections stay open until the test's cleanup.
type Blackhole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

// NewBlackhole starts one; tb's cleanup closes it and its connections.
func NewBlackhole(tb testing.TB) *Blackhole {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &Blackhole{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			c.Close()
		}
	})
	return b
}

// Addr is the host:port to connect to.
func (b *Blackhole) Addr() string { return b.ln.Addr().String() }

// Accepted counts the connections made so far.
func (b *Blackhole) Accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}
