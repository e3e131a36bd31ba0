// Package kafkawire speaks the Kafka protocol on connections of its own,
// for the two requests whose payloads are most of a batch copy's bytes.
// kgo copies every produce request's record batches into a request buffer
// before writing it, and reads every response into a fresh buffer that the
// runtime zeroes first; for a copier that moves batches whole those two
// passes over the bytes were a third of its CPU (docs/benchmarks/
// throughput.md). Here a produce request's batches are written from where
// they lie (writev), and a response can be read into a buffer the caller
// supplies.
//
// Connections are opened the way the kgo client they come from opens its
// own (its dialer, TLS included, its SASL mechanisms, its client id), so
// they reach whatever the client reaches, and they call the client's
// connect and request hooks, so its health and metrics see them too.
package kafkawire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrClosed fails requests on a connection that was closed or broke.
var ErrClosed = errors.New("kafkawire: connection closed")

// Conn is one connection to a broker. Requests may be sent from several
// goroutines at once: they are written in the order Request takes them,
// and one goroutine reads the answers, which a broker sends in the order
// of the requests.
type Conn struct {
	nc       net.Conn
	broker   kgo.BrokerMetadata
	hooks    []kgo.Hook
	clientID string
	versions map[int16][2]int16 // min and max by API key
	// renewAt: the broker ends the SASL session then; the connection
	// takes no new requests from then on (zero: never).
	renewAt time.Time

	wmu  sync.Mutex // orders writes with their places in calls
	corr int32
	// waiting counts the calls written and not answered; draining: the
	// connection takes no more, and closes once waiting is 0. Both under
	// wmu.
	waiting  int
	draining atomic.Bool
	// calls are the requests written and not answered yet, in order.
	calls chan *call

	// active is when a request was last written or answered (unix ns).
	active atomic.Int64

	dieOnce sync.Once
	dead    chan struct{}
	err     error // why it died; set before dead closes
}

// call is one request waiting for its answer.
type call struct {
	corr     int32
	key      int16
	flexible bool // the answer's header has tagged fields
	timeout  time.Duration
	pool     *BufferPool
	// e2e is for the client's hooks: the writer fills in its part before
	// it queues the call, the reader the rest.
	e2e       kgo.BrokerE2E
	writtenAt time.Time
	done      chan callResult // buffered
}

type callResult struct {
	body []byte
	buf  *Buffer
	err  error
}

// AnswerMargin is how long past a request's own wait (a fetch's max wait,
// a produce's timeout) its answer is waited for before the connection is
// given up, as kgo's request timeout overhead.
const AnswerMargin = 10 * time.Second

// maxInFlight bounds the requests written and not yet answered on one
// connection.
const maxInFlight = 64

func newConn(nc net.Conn, broker kgo.BrokerMetadata, hooks []kgo.Hook, clientID string) *Conn {
	c := &Conn{nc: nc, broker: broker, hooks: hooks, clientID: clientID, calls: make(chan *call, maxInFlight),
		dead: make(chan struct{})}
	c.active.Store(time.Now().UnixNano())
	go c.read()
	return c
}

// Version returns the version of an API to use, the highest both ours
// (at most) and the broker support, or false if there is none.
func (c *Conn) Version(key, ours int16) (int16, bool) {
	v, ok := c.versions[key]
	if !ok || v[0] > ours {
		return 0, false
	}
	return min(ours, v[1]), true
}

// Usable reports whether the connection still takes requests: it is not
// broken or closing, its SASL session is not due, and it was used lately.
func (c *Conn) Usable() bool {
	select {
	case <-c.dead:
		return false
	default:
	}
	now := time.Now()
	return !c.draining.Load() && (c.renewAt.IsZero() || now.Before(c.renewAt)) &&
		now.Sub(time.Unix(0, c.active.Load())) < maxIdleTime
}

// maxIdleTime is how long a connection may sit unused and still be used:
// brokers close connections idle for connections.max.idle.ms (10 minutes
// by default), which the next request would learn only by failing.
const maxIdleTime = 5 * time.Minute

// Close ends the connection; requests waiting fail with ErrClosed.
func (c *Conn) Close() { c.die(ErrClosed) }

func (c *Conn) die(err error) {
	c.dieOnce.Do(func() {
		c.err = err
		close(c.dead)
		c.nc.Close()
	})
}

// Request is one request: its key and version, its body (without the
// header) as parts written one after another, and whether the version is
// a flexible one. Timeout bounds the wait for the answer once the broker
// starts on it (a produce's or a fetch's own wait plus a margin); zero
// waits as long as the connection lives. A large answer is read into a
// buffer from Pool, if set.
type Request struct {
	Key, Version int16
	Flexible     bool
	// FlexibleAnswer: the answer's header has tagged fields. Every
	// flexible version's does except ApiVersions'.
	FlexibleAnswer bool
	Body           net.Buffers
	Timeout        time.Duration
	Pool           *BufferPool
}

// Do sends a request and waits for its answer's body. A ctx that ends
// stops the wait, not the request: the answer is still read, and dropped.
func (c *Conn) Do(ctx context.Context, r Request) ([]byte, error) {
	body, _, err := c.DoPooled(ctx, r)
	return body, err
}

// DoPooled is Do, and returns the buffer from r.Pool the body lies in,
// held once by the caller (nil if the answer was small enough to be read
// into a buffer of its own).
func (c *Conn) DoPooled(ctx context.Context, r Request) ([]byte, *Buffer, error) {
	cl := &call{key: r.Key, flexible: r.FlexibleAnswer, timeout: r.Timeout, pool: r.Pool,
		done: make(chan callResult, 1)}
	if err := c.write(cl, r); err != nil {
		return nil, nil, err
	}
	select {
	case res := <-cl.done:
		return res.body, res.buf, res.err
	case <-ctx.Done():
		// The answer's buffer, if any, goes to the collector.
		return nil, nil, ctx.Err()
	}
}

// write frames and writes one request and queues its call for the reader.
func (c *Conn) write(cl *call, r Request) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.dead:
		return c.err
	default:
	}
	if c.draining.Load() {
		return ErrClosed
	}
	c.corr++
	cl.corr = c.corr
	size := 0
	for _, b := range r.Body {
		size += len(b)
	}
	hdr := make([]byte, 0, 16+len(c.clientID))
	hdr = binary.BigEndian.AppendUint32(hdr, 0) // size, below
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(r.Key))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(r.Version))
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(cl.corr))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(len(c.clientID)))
	hdr = append(hdr, c.clientID...)
	if r.Flexible {
		hdr = append(hdr, 0) // no tagged fields
	}
	binary.BigEndian.PutUint32(hdr, uint32(len(hdr)-4+size))
	start := time.Now()
	n, err := writeBuffers(c.nc, append(net.Buffers{hdr}, r.Body...))
	cl.e2e.BytesWritten, cl.e2e.TimeToWrite = int(n), time.Since(start)
	if err != nil {
		cl.e2e.WriteErr = err
		c.callHooks(cl)
		err = fmt.Errorf("kafkawire: write to broker %d: %w", c.broker.NodeID, err)
		c.die(err)
		return err
	}
	cl.writtenAt = time.Now()
	c.active.Store(cl.writtenAt.UnixNano())
	// Queued in the order written (under wmu), the order of the answers.
	select {
	case c.calls <- cl:
		c.waiting++
		return nil
	case <-c.dead:
		return c.err
	}
}

// writeBuffers writes the parts with one writev where the connection
// supports it (TCP), or else as one write of the parts put together, so
// that a TLS connection does not seal each small part in a record of its
// own.
func writeBuffers(nc net.Conn, bufs net.Buffers) (int64, error) {
	if _, ok := nc.(*net.TCPConn); ok {
		return bufs.WriteTo(nc)
	}
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	joined := make([]byte, 0, size)
	for _, b := range bufs {
		joined = append(joined, b...)
	}
	n, err := nc.Write(joined)
	return int64(n), err
}

// read answers the calls in order until the connection dies, then fails
// the ones left.
func (c *Conn) read() {
	var sizeBuf [4]byte
	for {
		var cl *call
		select {
		case cl = <-c.calls:
		case <-c.dead:
			c.failQueued()
			return
		}
		readStart := time.Now()
		if cl.timeout > 0 {
			c.nc.SetReadDeadline(readStart.Add(cl.timeout))
		} else {
			c.nc.SetReadDeadline(time.Time{})
		}
		body, buf, n, err := c.readAnswer(cl, sizeBuf[:])
		cl.e2e.ReadWait = max(0, readStart.Sub(cl.writtenAt))
		cl.e2e.TimeToRead, cl.e2e.BytesRead, cl.e2e.ReadErr = time.Since(readStart), n, err
		c.callHooks(cl)
		if err != nil {
			// Dead before the caller hears of it: a caller that asks
			// again gets a new connection, not this one.
			c.die(err)
			cl.done <- callResult{err: err}
			c.failQueued()
			return
		}
		cl.done <- callResult{body: body, buf: buf}
		c.active.Store(time.Now().UnixNano())
		c.wmu.Lock()
		c.waiting--
		if c.draining.Load() && c.waiting == 0 {
			c.die(ErrClosed)
		}
		c.wmu.Unlock()
	}
}

// drain takes no more requests and closes the connection once those
// written are answered.
func (c *Conn) drain() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.draining.Store(true)
	if c.waiting == 0 {
		c.die(ErrClosed)
	}
}

// readAnswer reads one answer and checks that it is the call's.
func (c *Conn) readAnswer(cl *call, sizeBuf []byte) ([]byte, *Buffer, int, error) {
	if _, err := io.ReadFull(c.nc, sizeBuf); err != nil {
		return nil, nil, 0, c.readErr(err)
	}
	size := int(binary.BigEndian.Uint32(sizeBuf))
	if size < 4 || size > maxAnswerBytes {
		return nil, nil, 4, fmt.Errorf("kafkawire: broker %d answered %d bytes", c.broker.NodeID, size)
	}
	buf, lent := cl.pool.get(size)
	fail := func(n int, err error) ([]byte, *Buffer, int, error) {
		lent.Release()
		return nil, nil, n, err
	}
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return fail(4, c.readErr(err))
	}
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != cl.corr {
		return fail(4+size, fmt.Errorf("kafkawire: broker %d answered request %d, want %d", c.broker.NodeID, corr, cl.corr))
	}
	body := buf[4:]
	if cl.flexible {
		var err error
		if body, err = skipTags(body); err != nil {
			return fail(4+size, err)
		}
	}
	return body, lent, 4 + size, nil
}

// maxAnswerBytes bounds an answer as kgo's BrokerMaxReadBytes default does.
const maxAnswerBytes = 100 << 20

func (c *Conn) readErr(err error) error {
	select {
	case <-c.dead:
		return c.err
	default:
	}
	return fmt.Errorf("kafkawire: read from broker %d: %w", c.broker.NodeID, err)
}

// failQueued fails the calls written but never answered. It holds the
// write lock, so no call is queued behind it unseen: a writer after it
// finds the connection dead.
func (c *Conn) failQueued() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		select {
		case cl := <-c.calls:
			cl.done <- callResult{err: c.err}
		default:
			return
		}
	}
}

// callHooks tells the client's request hooks about a call, as kgo does
// for its own requests.
func (c *Conn) callHooks(cl *call) {
	for _, h := range c.hooks {
		if h, ok := h.(kgo.HookBrokerE2E); ok {
			h.OnBrokerE2E(c.broker, cl.key, cl.e2e)
		}
	}
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return nil, errors.New("kafkawire: bad tagged fields")
	}
	b = b[used:]
	for range n {
		if _, used = binary.Uvarint(b); used <= 0 {
			return nil, errors.New("kafkawire: bad tagged fields")
		}
		b = b[used:]
		size, used := binary.Uvarint(b)
		if used <= 0 || uint64(len(b)-used) < size {
			return nil, errors.New("kafkawire: bad tagged fields")
		}
		b = b[used+int(size):]
	}
	return b, nil
}
