// Package kfakeauth puts SASL mechanisms kfake does not speak
// (OAUTHBEARER, AWS_MSK_IAM) in front of a kfake cluster, for tests.
//
// kfake's own SASL state knows PLAIN and SCRAM only, and a control
// function cannot move it: a handshake answered by a control leaves the
// connection unauthenticated to kfake, which then refuses everything else.
// So the cluster runs without kfake's SASL, control functions answer
// SaslHandshake and SaslAuthenticate with the test's Verifier, and a
// listener wrapper enforces what a broker would: it reads each connection's
// request headers and the answers to its authentications, and closes a
// connection that sends any other request before an authentication
// succeeded, or after its session (KIP-368) ended. Each such refusal is
// recorded, so a test can also assert there was none.
package kfakeauth

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Verifier judges one authentication's bytes. It returns the principal, or
// the error the broker answers with (SASL_AUTHENTICATION_FAILED and its
// text).
type Verifier func(auth []byte) (principal string, err error)

// Auth is one authentication the gate saw.
type Auth struct {
	At        time.Time
	Bytes     []byte
	Principal string
	Err       error
}

// Gate authenticates a kfake cluster's connections with one mechanism.
type Gate struct {
	mechanism string
	verify    Verifier
	lifetime  time.Duration

	mu      sync.Mutex
	auths   []Auth
	refused []string
	conns   int
}

// New returns a gate for mechanism whose sessions last lifetime (0: no
// re-authentication). Pass Opts to kfake.NewCluster, then Install.
func New(mechanism string, lifetime time.Duration, verify Verifier) *Gate {
	return &Gate{mechanism: mechanism, verify: verify, lifetime: lifetime}
}

// Opts are the cluster options the gate needs: its listener, and the
// session lifetime as the brokers' connections.max.reauth.ms, which they
// report as a real broker does (the gate's answers carry it too).
func (g *Gate) Opts() []kfake.Opt {
	opts := []kfake.Opt{kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return &listener{Listener: ln, g: g}, nil
	})}
	if g.lifetime > 0 {
		opts = append(opts, kfake.BrokerConfigs(map[string]string{
			"connections.max.reauth.ms": strconv.FormatInt(g.lifetime.Milliseconds(), 10)}))
	}
	return opts
}

// Install adds the control functions that answer the SASL requests.
func (g *Gate) Install(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.SASLHandshake), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.SASLHandshakeRequest)
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{g.mechanism}
		if r.Mechanism != g.mechanism {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		principal, err := g.verify(r.SASLAuthBytes)
		g.mu.Lock()
		g.auths = append(g.auths, Auth{At: time.Now(), Bytes: append([]byte(nil), r.SASLAuthBytes...), Principal: principal, Err: err})
		g.mu.Unlock()
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := err.Error()
			resp.ErrorMessage = &msg
			return resp, nil, true
		}
		// MSK answers a good AWS_MSK_IAM authentication with a JSON
		// document (franz-go requires one); an OAUTHBEARER success has
		// none, as a non-empty answer is the server's error (RFC 7628).
		if g.mechanism == AWSMechanism {
			resp.SASLAuthBytes = []byte(`{"version":"2020_10_22","request-id":"kfakeauth"}`)
		}
		resp.SessionLifetimeMillis = g.lifetime.Milliseconds()
		return resp, nil, true
	})
}

// Auths returns every authentication so far, in order.
func (g *Gate) Auths() []Auth {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Auth(nil), g.auths...)
}

// Refused returns why each refused connection was closed.
func (g *Gate) Refused() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.refused...)
}

// Connections counts the connections accepted.
func (g *Gate) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns
}

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.g.mu.Lock()
	l.g.conns++
	l.g.mu.Unlock()
	return &conn{Conn: c, g: l.g}, nil
}

// conn watches one connection: the requests kfake reads and the answers it
// writes, which a connection answers in the order asked.
type conn struct {
	net.Conn
	g *Gate

	mu       sync.Mutex
	in, out  frames
	asked    []kmsg.Request // requests not yet answered, their versions set
	authed   bool
	deadline time.Time // the session's end; zero: none
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		why := c.in.feed(p[:n], func(int) int { return 4 }, c.sawRequest)
		c.mu.Unlock()
		if why != "" {
			c.g.mu.Lock()
			c.g.refused = append(c.g.refused, why)
			c.g.mu.Unlock()
			c.Conn.Close()
			return 0, fmt.Errorf("kfakeauth: %s", why)
		}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.feed(p, c.answerWant, c.sawAnswer)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// sawRequest reads a request's key and version and says why the
// connection is refused, if it is.
func (c *conn) sawRequest(head []byte) string {
	if len(head) < 4 {
		return "a request shorter than its header"
	}
	key, version := int16(binary.BigEndian.Uint16(head)), int16(binary.BigEndian.Uint16(head[2:]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return fmt.Sprintf("unknown request key %d", key)
	}
	req.SetVersion(version)
	c.asked = append(c.asked, req)
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return ""
	}
	if !c.authed {
		return fmt.Sprintf("%s before an authentication succeeded", kmsg.NameForKey(key))
	}
	if !c.deadline.IsZero() && time.Now().After(c.deadline) {
		return fmt.Sprintf("%s %v after the SASL session ended", kmsg.NameForKey(key), time.Since(c.deadline).Round(time.Millisecond))
	}
	return ""
}

// answerWant keeps the whole answer to an authentication, nothing of others.
func (c *conn) answerWant(size int) int {
	if len(c.asked) > 0 && c.asked[0].Key() == kmsg.SASLAuthenticate.Int16() {
		return size
	}
	return 0
}

// sawAnswer pairs an answer with its request; an authentication's answer
// starts or ends the session.
func (c *conn) sawAnswer(frame []byte) string {
	if len(c.asked) == 0 {
		return ""
	}
	req := c.asked[0]
	c.asked = c.asked[1:]
	if req.Key() != kmsg.SASLAuthenticate.Int16() || len(frame) < 4 {
		return ""
	}
	body := frame[4:] // after the correlation id
	if req.IsFlexible() {
		body = skipTags(body)
	}
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		c.authed, c.deadline = false, time.Time{}
		return ""
	}
	c.authed, c.deadline = true, time.Time{}
	if resp.SessionLifetimeMillis > 0 {
		c.deadline = time.Now().Add(time.Duration(resp.SessionLifetimeMillis) * time.Millisecond)
	}
	return ""
}

// skipTags skips a flexible response header's tagged fields.
func skipTags(b []byte) []byte {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil
	}
	b = b[l:]
	for range n {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil
		}
		b = b[l+int(size):]
	}
	return b
}

// frames follows a stream of size-prefixed Kafka frames.
type frames struct {
	size   [4]byte
	nsize  int
	active bool   // within a frame
	left   int    // bytes of the current frame still to come
	want   int    // how many of its first bytes to keep
	head   []byte // those kept so far
	fired  bool
}

// feed walks b. For each frame, want(size) says how many of its first
// bytes to keep, and onHead gets them once they are in; feed stops at the
// first reason onHead gives.
func (f *frames) feed(b []byte, want func(size int) int, onHead func([]byte) string) string {
	for {
		if f.active && !f.fired && len(f.head) == f.want {
			f.fired = true
			if why := onHead(f.head); why != "" {
				return why
			}
		}
		if f.active && f.left == 0 {
			f.active = false
		}
		if len(b) == 0 {
			return ""
		}
		if !f.active {
			n := copy(f.size[f.nsize:], b)
			f.nsize += n
			b = b[n:]
			if f.nsize < 4 {
				return ""
			}
			f.nsize, f.active, f.fired = 0, true, false
			f.left = int(binary.BigEndian.Uint32(f.size[:]))
			f.want = min(want(f.left), f.left)
			f.head = f.head[:0]
			continue
		}
		n := min(f.left, len(b))
		if k := f.want - len(f.head); k > 0 {
			f.head = append(f.head, b[:min(k, n)]...)
		}
		f.left -= n
		b = b[n:]
	}
}
