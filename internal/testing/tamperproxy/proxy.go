// Package tamperproxy is a Kafka proxy for tests that play a hostile
// broker: it forwards a client's requests to a cluster as they are, and
// passes the answers back, but for its fetch responses, which a test may
// answer with a connection-level fault (garbage, a wrong correlation id, a
// truncated, oversized or slow response) or change. It rewrites the broker
// addresses of Metadata and FindCoordinator answers to listeners of its
// own, so a client never reaches the cluster around it. Responses are
// parsed and written with kmsg, by the api key and version of the request
// with the same correlation id.
package tamperproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fault is what the proxy sends in place of a fetch response.
type Fault int

// The faults, each as a hostile broker would send it.
const (
	// Forward sends the response (as the test's Fetch left it).
	Forward Fault = iota
	// Garbage sends random bytes of the response's length.
	Garbage
	// WrongCorrelation sends the response under another correlation id.
	WrongCorrelation
	// Truncated sends the response's size and half of it, then closes
	// the connection.
	Truncated
	// Oversized claims a response of OversizedBytes.
	Oversized
	// Slow claims a response of SlowBytes and sends a byte every
	// SlowEvery until the client gives up.
	Slow
)

// The sizes and pace of the Oversized and Slow faults.
const (
	OversizedBytes = 100 << 20
	SlowBytes      = 40 << 20
	SlowEvery      = 100 * time.Millisecond
)

// Proxy stands between Kafka clients and one cluster.
type Proxy struct {
	tb    testing.TB
	fetch func(*kmsg.FetchResponse) Fault

	mu        sync.Mutex
	listeners map[int32]net.Listener // by broker node id; -1 the bootstrap
	conns     []net.Conn
	closed    bool
	requests  [128]atomic.Int64 // by api key
}

// New starts a proxy of the cluster at bootstrap; fetch, if not nil, says
// what to do with each fetch response (it may change the response).
// tb's cleanup closes it.
func New(tb testing.TB, bootstrap string, fetch func(*kmsg.FetchResponse) Fault) *Proxy {
	tb.Helper()
	p := &Proxy{tb: tb, fetch: fetch, listeners: map[int32]net.Listener{}}
	if _, err := p.listen(-1, bootstrap); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.close)
	return p
}

// Addr is the bootstrap address to give clients.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listeners[-1].Addr().String()
}

// Requests counts the requests of an api key clients sent so far.
func (p *Proxy) Requests(key kmsg.Key) int64 { return p.requests[key].Load() }

func (p *Proxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, l := range p.listeners {
		l.Close()
	}
	for _, c := range p.conns {
		c.Close()
	}
}

// listen returns the proxy's listener for broker node (at upstream),
// starting it the first time.
func (p *Proxy) listen(node int32, upstream string) (net.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.listeners[node]; l != nil {
		return l.Addr(), nil
	}
	if p.closed {
		return nil, net.ErrClosed
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.listeners[node] = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c, upstream)
		}
	}()
	return l.Addr(), nil
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

// asked is a request in flight on a connection: its key and version.
type asked struct{ key, version int16 }

// serve forwards one client connection to upstream.
func (p *Proxy) serve(client net.Conn, upstream string) {
	if !p.track(client) {
		return
	}
	server, err := net.Dial("tcp", upstream)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(server) {
		client.Close()
		return
	}
	defer client.Close()
	defer server.Close()
	var mu sync.Mutex
	inFlight := map[int32]asked{}
	go func() {
		defer server.Close()
		defer client.Close()
		for {
			frame, err := readFrame(client)
			if err != nil || len(frame) < 12 {
				return
			}
			key, version := int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:]))
			if key >= 0 && int(key) < len(p.requests) {
				p.requests[key].Add(1)
			}
			mu.Lock()
			inFlight[int32(binary.BigEndian.Uint32(frame[8:]))] = asked{key, version}
			mu.Unlock()
			if _, err := server.Write(frame); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(server)
		if err != nil || len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		mu.Lock()
		a, ok := inFlight[corr]
		delete(inFlight, corr)
		mu.Unlock()
		if !ok {
			return
		}
		if err := p.answer(client, a, frame); err != nil {
			return
		}
	}
}

// answer passes one response frame (its size first) to the client, with
// addresses rewritten and a fetch response's fault.
func (p *Proxy) answer(client net.Conn, a asked, frame []byte) error {
	switch kmsg.Key(a.key) {
	case kmsg.Metadata, kmsg.FindCoordinator:
	case kmsg.Fetch:
		if p.fetch != nil {
			break
		}
		fallthrough
	default:
		_, err := client.Write(frame)
		return err
	}
	resp := kmsg.ResponseForKey(a.key)
	resp.SetVersion(a.version)
	head := 8 // size and correlation id
	if resp.IsFlexible() {
		n, err := skipTags(frame[head:])
		if err != nil {
			return err
		}
		head += n
	}
	if err := resp.ReadFrom(frame[head:]); err != nil {
		return err
	}
	fault := Forward
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			if err := p.rewrite(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port); err != nil {
				return err
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			if err := p.rewrite(r.NodeID, &r.Host, &r.Port); err != nil {
				return err
			}
		}
		for i := range r.Coordinators {
			if err := p.rewrite(r.Coordinators[i].NodeID, &r.Coordinators[i].Host, &r.Coordinators[i].Port); err != nil {
				return err
			}
		}
	case *kmsg.FetchResponse:
		fault = p.fetch(r)
	}
	out := append([]byte(nil), frame[:head]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return send(client, fault, out)
}

// rewrite points a broker's address at the proxy's listener for it.
func (p *Proxy) rewrite(node int32, host *string, port *int32) error {
	if *host == "" {
		return nil
	}
	addr, err := p.listen(node, net.JoinHostPort(*host, strconv.Itoa(int(*port))))
	if err != nil {
		return err
	}
	tcp := addr.(*net.TCPAddr)
	*host, *port = tcp.IP.String(), int32(tcp.Port)
	return nil
}

// send writes a response frame as fault says.
func send(c net.Conn, fault Fault, frame []byte) error {
	switch fault {
	case Garbage:
		junk := make([]byte, len(frame)-4)
		for i := range junk {
			junk[i] = byte(rand.N(256))
		}
		frame = append(frame[:4:4], junk...)
	case WrongCorrelation:
		binary.BigEndian.PutUint32(frame[4:], binary.BigEndian.Uint32(frame[4:])+1)
	case Truncated:
		c.Write(frame[:4+(len(frame)-4)/2])
		c.Close()
		return errors.New("truncated")
	case Oversized:
		binary.BigEndian.PutUint32(frame, OversizedBytes)
	case Slow:
		binary.BigEndian.PutUint32(frame, SlowBytes)
		for i := 0; ; i++ {
			if _, err := c.Write(frame[i%len(frame) : i%len(frame)+1]); err != nil {
				return err
			}
			time.Sleep(SlowEvery) // the fault is the pace itself
		}
	}
	_, err := c.Write(frame)
	return err
}

// readFrame reads one size-prefixed Kafka frame, the size included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > 256<<20 {
		return nil, errors.New("frame size out of range")
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// skipTags returns the length of a flexible header's tagged fields.
func skipTags(b []byte) (int, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, errors.New("bad tag count")
	}
	at := n
	for range count {
		if _, k := binary.Uvarint(b[at:]); k > 0 {
			at += k
		} else {
			return 0, errors.New("bad tag")
		}
		size, k := binary.Uvarint(b[at:])
		if k <= 0 || uint64(len(b)-at-k) < size {
			return 0, errors.New("bad tag size")
		}
		at += k + int(size)
	}
	return at, nil
}
