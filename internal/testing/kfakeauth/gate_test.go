package kfakeauth

import (
	"context"
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
