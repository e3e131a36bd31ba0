package kafkaconn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/testing/kfakeauth"
)

// The region franz-go signs for when the broker's host name (here
// 127.0.0.1) carries none: AWS_REGION.
const testAWSRegion = "eu-west-3"

// awsCluster is a kfake cluster behind MSK IAM that accepts keys.
func awsCluster(t *testing.T, lifetime time.Duration, keys ...kfakeauth.AWSKey) (*kfake.Cluster, *kfakeauth.Gate) {
	t.Helper()
	t.Setenv("AWS_REGION", testAWSRegion)
	g := kfakeauth.New(kfakeauth.AWSMechanism, lifetime, kfakeauth.AWSVerifier("127.0.0.1", testAWSRegion, keys...))
	c := newCluster(t, append(g.Opts(), kfake.SeedTopics(2, "orders"))...)
	g.Install(c)
	return c, g
}

// noRefusals fails t if the gate closed a connection that skipped or
// outlived its authentication.
func noRefusals(t *testing.T, g *kfakeauth.Gate) {
	t.Helper()
	if r := g.Refused(); len(r) > 0 {
		t.Fatalf("connections refused: %v", r)
	}
}

func TestAWSMSKIAMStaticKeys(t *testing.T) {
	key := kfakeauth.AWSKey{AccessKeyID: "AKIAKMIRRORTEST", SecretAccessKey: "test/secret+key", SessionToken: "session-token"}
	c, g := awsCluster(t, 0, key)
	cfg := Config{BootstrapServers: c.ListenAddrs(), Security: Security{Protocol: ProtocolSASLPlaintext,
		SASLMechanism: MechanismAWSMSKIAM, AWS: AWSAuth{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey,
			SessionToken: key.SessionToken}}}
	got, err := TopicPartitions(t.Context(), cfg, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if got["orders"] != 2 {
		t.Errorf("orders: %d partitions, want 2", got["orders"])
	}
	auths := g.Auths()
	if len(auths) == 0 {
		t.Fatal("no authentication reached the broker")
	}
	for _, a := range auths {
		if a.Err != nil || a.Principal != key.AccessKeyID {
			t.Errorf("authentication %s: principal %q, %v", a.Bytes, a.Principal, a.Err)
		}
	}
	noRefusals(t, g)

	// The wrong secret signs a request MSK refuses: the connection is
	// refused, and the error says so.
	cfg.Security.AWS.SecretAccessKey = "not-the-secret"
	_, err = TopicPartitions(t.Context(), cfg, testTimeout)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") ||
		!strings.Contains(err.Error(), "signature does not match") {
		t.Fatalf("wrong secret: %v, want an UnreachableError saying SASL_AUTHENTICATION_FAILED: signature does not match", err)
	}
	last := g.Auths()[len(g.Auths())-1]
	if last.Err == nil {
		t.Error("the last authentication, with the wrong secret, was accepted")
	}
	noRefusals(t, g)
}

// isolateAWSChain points the AWS default chain at dir's files only, and
// away from any metadata service.
func isolateAWSChain(t *testing.T, dir string) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestAWSMSKIAMDefaultChainFromEnvironment(t *testing.T) {
	key := kfakeauth.AWSKey{AccessKeyID: "AKIAENVIRONMENT", SecretAccessKey: "env-secret", SessionToken: "env-token"}
	c, g := awsCluster(t, 0, key)
	isolateAWSChain(t, t.TempDir())
	t.Setenv("AWS_ACCESS_KEY_ID", key.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", key.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", key.SessionToken)
	sec := Security{Protocol: ProtocolSASLPlaintext, SASLMechanism: MechanismAWSMSKIAM}
	if _, err := TopicPartitions(t.Context(), Config{BootstrapServers: c.ListenAddrs(), Security: sec}, testTimeout); err != nil {
		t.Fatal(err)
	}
	if a := g.Auths(); len(a) == 0 || a[0].Principal != key.AccessKeyID {
		t.Fatalf("authentications %+v, want the environment's key", a)
	}
	id, source, err := ResolveAWSCredentials(t.Context(), sec.AWS)
	if err != nil || id != key.AccessKeyID || !strings.Contains(source, "default chain") {
		t.Fatalf("ResolveAWSCredentials: %q %q %v", id, source, err)
	}
	noRefusals(t, g)
}

// TestAWSMSKIAMDefaultChainRefreshes: credentials from the chain (here a
// shared config's credential_process, which hands out a new key each time
// it runs) are renewed before they expire, and a re-authentication
// (KIP-368) signs with the new ones, on the same client.
func TestAWSMSKIAMDefaultChainRefreshes(t *testing.T) {
	var keys []kfakeauth.AWSKey
	for i := 1; i <= 20; i++ {
		keys = append(keys, kfakeauth.AWSKey{AccessKeyID: fmt.Sprintf("AKIAROTATED%d", i), SecretAccessKey: "rotated-secret"})
	}
	c, g := awsCluster(t, 500*time.Millisecond, keys...)
	dir := t.TempDir()
	isolateAWSChain(t, dir)
	// Each run hands out the next key, expiring 2 s past the cache's
	// renewal window.
	script := filepath.Join(dir, "creds.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
n=$(( $(cat %[1]s/count 2>/dev/null || echo 0) + 1 ))
echo $n > %[1]s/count
exp=$(date -u -d @$(( $(date +%%s) + %[2]d )) +%%Y-%%m-%%dT%%H:%%M:%%SZ)
printf '{"Version":1,"AccessKeyId":"AKIAROTATED%%s","SecretAccessKey":"rotated-secret","Expiration":"%%s"}' $n $exp
`, dir, int(awsCredentialsExpiryWindow/time.Second)+2)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("[default]\ncredential_process = "+script+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl, err := Config{BootstrapServers: c.ListenAddrs(), Security: Security{Protocol: ProtocolSASLPlaintext,
		SASLMechanism: MechanismAWSMSKIAM}}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(15 * time.Second)
	seen := map[string]bool{}
	for tick := time.NewTicker(100 * time.Millisecond); len(seen) < 2; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("keys used in %d authentications: %v; want a renewed one", len(g.Auths()), seen)
		}
		if _, err := cl.Request(t.Context(), kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
		for _, a := range g.Auths() {
			if a.Err != nil {
				t.Fatalf("authentication refused: %v", a.Err)
			}
			seen[a.Principal] = true
		}
	}
	if !seen["AKIAROTATED1"] || !seen["AKIAROTATED2"] {
		t.Errorf("keys used: %v, want AKIAROTATED1 then AKIAROTATED2", seen)
	}
	// Between the two keys, re-authentications reused the cached one.
	if n := len(g.Auths()); n <= len(seen) {
		t.Errorf("%d authentications for %d keys: the credentials were not cached", n, len(seen))
	}
	noRefusals(t, g)
}
