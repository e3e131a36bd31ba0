package testnet

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections on loopback to a target until it is cut:
// then the target is gone for its clients, either refusing (a stopped
// server: open connections reset, new ones refused) or hanging (a network
// that drops everything: open connections and new ones get no answer).
type Proxy struct {
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener // under mu
	closed bool
	conns  []net.Conn
	cut    CutMode
}

// CutMode is how a cut Proxy's target goes away.
type CutMode int

const (
	notCut CutMode = iota
	// Refuse closes every connection and refuses new ones.
	Refuse
	// Hang stops forwarding: connections stay open and get no answer.
	Hang
)

// NewProxy starts a proxy to target (host:port); tb's cleanup closes it.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, addr: ln.Addr().String(), target: target}
	go p.accept(ln)
	tb.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.ln.Close()
		p.mu.Unlock()
		p.closeAll()
	})
	return p
}

// Addr is the host:port to connect to.
func (p *Proxy) Addr() string { return p.addr }

// Restore brings the target back after a cut, on the same address: new
// connections are forwarded again. Connections a hang held are closed, as
// a network that comes back finds its peers gave up on them.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	was := p.cut
	p.cut = notCut
	p.mu.Unlock()
	switch was {
	case Refuse:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return ln.Close()
		}
		p.ln = ln
		go p.accept(ln)
	case Hang:
		p.closeAll()
	}
	return nil
}

// Cut takes the target away from the proxy's clients, as mode says.
func (p *Proxy) Cut(mode CutMode) {
	p.mu.Lock()
	p.cut = mode
	p.mu.Unlock()
	if mode == Refuse {
		p.mu.Lock()
		p.ln.Close()
		p.mu.Unlock()
		p.closeAll()
	}
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if cut == Hang {
			continue // held open, never answered
		}
		go p.forward(c)
	}
}

// forward pipes c to a new connection to the target, until either side
// closes or the proxy is cut (a hang stops copying, so nothing more
// arrives either way).
func (p *Proxy) forward(c net.Conn) {
	t, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, t)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				hung := p.cut == Hang
				p.mu.Unlock()
				if hung {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				p.mu.Lock()
				hung := p.cut == Hang
				p.mu.Unlock()
				if !hung {
					dst.Close()
					src.Close()
				}
				return
			}
		}
	}
	go pipe(t, c)
	go pipe(c, t)
}
