package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/kfakeauth"
	"kmirror/internal/testing/syncbuf"
)

// TestMirrorOverTokenMechanisms: a mirror created with the CLI whose source
// signs in with AWS_MSK_IAM (static keys) or OAUTHBEARER (client
// credentials, scope and extensions; the destination too, from the
// server's settings) passes --check with its credential rows, copies
// every record, and never shows a secret. The clusters refuse any
// connection that is not authenticated first (kfakeauth).
func TestMirrorOverTokenMechanisms(t *testing.T) {
	dir := t.TempDir()
	secretFile := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("AWS_MSK_IAM", func(t *testing.T) {
		const region = "ca-central-1"
		t.Setenv("AWS_REGION", region) // 127.0.0.1 names no region to sign for
		key := kfakeauth.AWSKey{AccessKeyID: "AKIAKMIRRORE2E", SecretAccessKey: "e2e/aws+secret"}
		src := kfakeauth.New(kfakeauth.AWSMechanism, time.Second, kfakeauth.AWSVerifier("127.0.0.1", region, key))
		srcSec := kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "AWS_MSK_IAM",
			AWS: kafkaconn.AWSAuth{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey}}
		awsArgs := func(secret string) []string {
			return []string{"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "AWS_MSK_IAM",
				"--aws-access-key-id", key.AccessKeyID, "--aws-secret-access-key-file", secretFile("aws", secret)}
		}
		base, srcAddr := mirrorOverGates(t, src, nil, srcSec, kafkaconn.Security{}, awsArgs(key.SecretAccessKey),
			[]string{"source       AWS credentials", "source       AWS signing region"}, key.SecretAccessKey,
			func() bool { // authentications over more than two 1 s sessions
				a := src.Auths()
				return len(a) > 1 && a[len(a)-1].At.Sub(a[0].At) > 2*time.Second
			})

		// The wrong secret: the source refuses the signature, and the
		// create says so, creating nothing.
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"mirrors", "--server", base, "--create", "--mirror", "wrong",
			"--source-bootstrap", srcAddr}, awsArgs("not-the-secret")...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "SASL_AUTHENTICATION_FAILED") ||
			!strings.Contains(errOut.String(), "signature does not match") || strings.Contains(errOut.String(), "not-the-secret") {
			t.Fatalf("a create with the wrong secret: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		t.Logf("the wrong secret: %s", strings.TrimSpace(errOut.String()))
	})
	t.Run("OAUTHBEARER", func(t *testing.T) {
		ext := map[string]string{"logicalCluster": "lkc-e2e", "identityPoolId": "pool-e2e"}
		srcIssuer := kfakeauth.NewIssuer(t, "kmirror-source", "source-client-secret", 3*time.Second)
		dstIssuer := kfakeauth.NewIssuer(t, "kmirror-destination", "destination-client-secret", 3*time.Second)
		src := kfakeauth.New(kfakeauth.OAuthMechanism, time.Second, srcIssuer.Verifier(ext))
		dst := kfakeauth.New(kfakeauth.OAuthMechanism, time.Second, dstIssuer.Verifier(nil))
		srcSec := kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "OAUTHBEARER",
			OAuth: kafkaconn.OAuthAuth{TokenEndpointURL: srcIssuer.URL, ClientID: srcIssuer.ClientID, ClientSecret: srcIssuer.Secret,
				Scope: "kafka", Extensions: ext}}
		dstSec := kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "OAUTHBEARER",
			OAuth: kafkaconn.OAuthAuth{TokenEndpointURL: dstIssuer.URL, ClientID: dstIssuer.ClientID, ClientSecret: dstIssuer.Secret}}
		mirrorOverGates(t, src, dst, srcSec, dstSec, []string{"--security-protocol", "SASL_PLAINTEXT",
			"--sasl-mechanism", "OAUTHBEARER", "--sasl-oauthbearer-token-endpoint-url", srcIssuer.URL,
			"--sasl-oauthbearer-client-id", srcIssuer.ClientID,
			"--sasl-oauthbearer-client-secret-file", secretFile("oauth", srcIssuer.Secret),
			"--sasl-oauthbearer-scope", "kafka", "--sasl-oauthbearer-extension", "logicalCluster=lkc-e2e",
			"--sasl-oauthbearer-extension", "identityPoolId=pool-e2e"},
			[]string{"source       OAuth token", "destination  OAuth token"}, srcIssuer.Secret,
			func() bool { // each cluster saw an authentication after the first token expired
				return authedAfter(src, srcIssuer.Issued()[0].Expires) && authedAfter(dst, dstIssuer.Issued()[0].Expires)
			})
		for _, tok := range srcIssuer.Issued() {
			if tok.Scope != "kafka" {
				t.Errorf("the source's token was asked with scope %q", tok.Scope)
			}
		}
		if len(srcIssuer.Issued()) == 0 || len(dstIssuer.Issued()) == 0 {
			t.Errorf("tokens issued: %d for the source, %d for the destination", len(srcIssuer.Issued()), len(dstIssuer.Issued()))
		}
	})
}

// authedAfter says whether g saw an authentication after at (each one
// accepted: mirrorOverGates checks).
func authedAfter(g *kfakeauth.Gate, at time.Time) bool {
	a := g.Auths()
	return len(a) > 0 && a[len(a)-1].At.After(at)
}

// mirrorOverGates runs a server whose source (and destination, when dst
// is not nil) sits behind a gate, creates mirror m over the source with
// the CLI's createArgs, checks it (wantRows among --check's output), adds
// topic bench, and waits until every record produced is on the
// destination; then, once renewed says the credentials were renewed,
// does it again.
//
// It returns the server's base URL and the source's address.
func mirrorOverGates(t *testing.T, src, dst *kfakeauth.Gate, srcSec, dstSec kafkaconn.Security, createArgs, wantRows []string, secret string,
	renewed func() bool) (string, string) {
	cfg := devcluster.Config{
		SourceOpts:      append(src.Opts(), kfake.NumBrokers(1), kfake.SeedTopics(3, "bench")),
		DestinationOpts: []kfake.Opt{kfake.NumBrokers(1)},
	}
	if dst != nil {
		cfg.DestinationOpts = append(dst.Opts(), cfg.DestinationOpts...)
	}
	clusters, err := devcluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close)
	src.Install(clusters.Source)
	if dst != nil {
		dst.Install(clusters.Destination)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srcConn := kafkaconn.Config{BootstrapServers: []string{clusters.SourceAddr()}, Security: srcSec}
	dstConn := kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}, Security: dstSec}
	var logs syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	s := startServerOn(t, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})), clusters, func(c *serverConfig) {
		c.Destination = dstConn
		c.SecretKeyFile = keyFile
	})
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(t.Context(), append([]string{"mirrors", "--server", s.base}, args...), &out, &errOut); code != 0 {
			t.Fatalf("kmirror mirrors %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
		}
		return out.String()
	}
	cli(append([]string{"--create", "--mirror", "m", "--source-bootstrap", clusters.SourceAddr()}, createArgs...)...)
	out := cli("--check", "--mirror", "m", "--topic", "bench")
	for _, row := range wantRows {
		if !strings.Contains(out, row) {
			t.Errorf("--check lacks the row %q:\n%s", row, out)
		}
	}
	cli("--add", "--mirror", "m", "--topic", "bench")

	const perPartition = 50
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	copied := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for p := range int32(3) {
			for ; ; <-tick.C {
				recs := readPartition(t, dstConn, p)
				if len(recs) == n {
					for i, r := range recs {
						if string(r.Value) != strconv.Itoa(i) {
							t.Fatalf("partition %d offset %d: %q, want %d", p, i, r.Value, i)
						}
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("partition %d: %d of %d records on the destination", p, len(recs), n)
				}
			}
		}
	}
	produceTo(t, srcConn, 0, perPartition)
	copied(perPartition)
	// Mirroring goes on across re-authentications (and, with tokens, a
	// new token): the next records arrive too.
	deadline := time.Now().Add(20 * time.Second)
	for ; !renewed(); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within 20 s: %d source authentications", len(src.Auths()))
		}
	}
	produceTo(t, srcConn, perPartition, perPartition)
	copied(2 * perPartition)

	if list := cli("--list"); strings.Contains(list, secret) {
		t.Errorf("--list shows the secret")
	}
	for name, g := range map[string]*kfakeauth.Gate{"source": src, "destination": dst} {
		if g == nil {
			continue
		}
		if r := g.Refused(); len(r) > 0 {
			t.Errorf("%s refused connections: %v", name, r)
		}
		auths := g.Auths()
		if len(auths) == 0 {
			t.Errorf("%s: no authentication", name)
		}
		for _, a := range auths {
			if a.Err != nil {
				t.Errorf("%s refused an authentication: %v", name, a.Err)
			}
		}
	}
	return s.base, clusters.SourceAddr()
}

// produceTo writes n records numbered from first to each partition of the
// source's bench.
func produceTo(t *testing.T, conn kafkaconn.Config, first, n int) {
	t.Helper()
	cl, err := conn.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var records []*kgo.Record
	for p := range int32(3) {
		for i := range n {
			records = append(records, &kgo.Record{Topic: "bench", Partition: p, Value: []byte(strconv.Itoa(first + i))})
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readPartition reads bench's partition p on the destination.
func readPartition(t *testing.T, conn kafkaconn.Config, p int32) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	off, err := kafkaconn.ReadOffsets(ctx, adm, "bench", p, false)
	if errors.Is(err, kafkaconn.ErrTopicMissing) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	recs, err := kafkaconn.ReadRecords(ctx, conn, "bench", p, off.Start, off.End, int(off.End-off.Start)+1, false)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
