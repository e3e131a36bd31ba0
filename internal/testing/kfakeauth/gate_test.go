package kfakeauth

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

func gated(t *testing.T, lifetime time.Duration, verify Verifier) (*kfake.Cluster, *Gate) {
	t.Helper()
	g := New(OAuthMechanism, lifetime, verify)
	c, err := kfake.NewCluster(append(g.Opts(), kfake.NumBrokers(1))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	g.Install(c)
	return c, g
}

func metadata(t *testing.T, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// TestGateRefusesUnauthenticated: a client that does not authenticate, or
// whose authentication fails, gets nothing; one that does is served.
func TestGateRefusesUnauthenticated(t *testing.T) {
	c, g := gated(t, 0, func(b []byte) (string, error) {
		bearer, err := ParseBearer(b)
		if err == nil && bearer.Token != "good" {
			return "", errBadToken
		}
		return "user", err
	})
	if err := metadata(t, kgo.SeedBrokers(c.ListenAddrs()...)); err == nil {
		t.Fatal("a client without SASL was served")
	}
	if r := g.Refused(); len(r) == 0 || !strings.Contains(r[0], "Metadata before an authentication succeeded") {
		t.Fatalf("refused: %v", r)
	}
	bad := oauth.Auth{Token: "bad"}.AsMechanism()
	if err := metadata(t, kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(bad)); err == nil || !strings.Contains(err.Error(), errBadToken.Error()) {
		t.Fatalf("a bad token: %v", err)
	}
	good := oauth.Auth{Token: "good", Extensions: map[string]string{"logicalCluster": "lkc-1"}}.AsMechanism()
	if err := metadata(t, kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(good)); err != nil {
		t.Fatal(err)
	}
	a := g.Auths()
	if got, _ := ParseBearer(a[len(a)-1].Bytes); got.Token != "good" || got.Extensions["logicalCluster"] != "lkc-1" {
		t.Fatalf("last authentication %q parsed as %+v", a[len(a)-1].Bytes, got)
	}
}

var errBadToken = errorString("invalid_token")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestGateEndsSessions: a connection that goes on past its session's end
// without authenticating again is closed and recorded, as a broker with
// connections.max.reauth.ms closes it.
func TestGateEndsSessions(t *testing.T) {
	c, g := gated(t, 200*time.Millisecond, func(b []byte) (string, error) { return "user", nil })
	conn, err := net.DialTimeout("tcp", c.ListenAddrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	corr := int32(0)
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		t.Helper()
		corr++
		body := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, corr)
		if _, err := conn.Write(body); err != nil {
			return nil, err
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return nil, err
		}
		buf := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, buf); err != nil {
			return nil, err
		}
		buf = buf[4:] // the correlation id
		if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
			buf = skipTags(buf)
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, resp.ReadFrom(buf)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = OAuthMechanism
	if _, err := roundTrip(hs); err != nil {
		t.Fatal(err)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("n,,\x01auth=Bearer t\x01\x01")
	resp, err := roundTrip(auth)
	if err != nil {
		t.Fatal(err)
	}
	if ar := resp.(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 200 {
		t.Fatalf("authenticate answered %+v", ar)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(4)
	if _, err := roundTrip(md); err != nil {
		t.Fatalf("a request within the session: %v", err)
	}
	// The session's end is a moment, not an event to wait for.
	<-time.After(250 * time.Millisecond)
	if _, err := roundTrip(md); err == nil {
		t.Fatal("a request after the session ended was answered")
	}
	if r := g.Refused(); len(r) != 1 || !strings.Contains(r[0], "Metadata") || !strings.Contains(r[0], "after the SASL session ended") {
		t.Fatalf("refused: %v", r)
	}
}
