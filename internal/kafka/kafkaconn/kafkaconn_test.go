package kafkaconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"kmirror/internal/testing/testcert"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

const testTimeout = 3 * time.Second

func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTopicPartitionsPlaintext(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "orders"), kfake.SeedTopics(1, "__mirror_state"))
	if err := c.CreateTopic("payments", 2, nil); err != nil {
		t.Fatal(err)
	}
	got, err := TopicPartitions(t.Context(), Config{BootstrapServers: c.ListenAddrs()}, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"orders": 3, "payments": 2, "__mirror_state": 1}
	for topic, n := range want {
		if got[topic] != n {
			t.Errorf("%s: got %d partitions, want %d (all: %v)", topic, got[topic], n, got)
		}
	}
}

func TestTopicPartitionsSASL(t *testing.T) {
	for _, mech := range []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c := newCluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "admin", "secret"), kfake.SeedTopics(2, "orders"))
			cfg := Config{BootstrapServers: c.ListenAddrs(), Security: Security{
				Protocol: ProtocolSASLPlaintext, SASLMechanism: mech, SASLUsername: "admin", SASLPassword: "secret",
			}}
			got, err := TopicPartitions(t.Context(), cfg, testTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if got["orders"] != 2 {
				t.Errorf("orders: got %d partitions, want 2", got["orders"])
			}

			cfg.Security.SASLPassword = "wrong"
			start := time.Now()
			_, err = TopicPartitions(t.Context(), cfg, testTimeout)
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("wrong password: got %v, want *UnreachableError", err)
			}
			if elapsed := time.Since(start); elapsed > testTimeout+2*time.Second {
				t.Errorf("wrong password took %s", elapsed)
			}
			// kfake drops the connection on bad credentials (EOF); real Kafka
			// answers SASL_AUTHENTICATION_FAILED, which ends up in Err.
			if !strings.Contains(err.Error(), cfg.BootstrapServers[0]) {
				t.Errorf("wrong password error does not name the server: %v", err)
			}
		})
	}
}

func TestTopicPartitionsUnreachable(t *testing.T) {
	// A port that was free a moment ago: dials are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	const timeout = 2 * time.Second
	start := time.Now()
	_, err = TopicPartitions(t.Context(), Config{BootstrapServers: []string{addr}}, timeout)
	elapsed := time.Since(start)

	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want *UnreachableError", err)
	}
	// What answered (here nothing: the port is closed) is for the log only
	// (TestBrokerErrorsReadTheSame); Detail carries it.
	if want := fmt.Sprintf("cannot reach Kafka at %s within 2s", addr); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !strings.Contains(ue.Detail(), "dial tcp") {
		t.Errorf("detail %q does not carry the dial error", ue.Detail())
	}
	if elapsed > timeout+2*time.Second {
		t.Errorf("took %s, want about %s", elapsed, timeout)
	}
}

func TestTopicPartitionsSilentBroker(t *testing.T) {
	// Accepts connections and never answers: only the timeout ends the call.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()

	const timeout = 1 * time.Second
	start := time.Now()
	_, err = TopicPartitions(t.Context(), Config{BootstrapServers: []string{ln.Addr().String()}}, timeout)
	elapsed := time.Since(start)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want *UnreachableError", err)
	}
	if elapsed > timeout+2*time.Second {
		t.Errorf("took %s, want about %s", elapsed, timeout)
	}
	t.Logf("after %s: %v", elapsed, err)
}

func TestTopicPartitionsTLS(t *testing.T) {
	certPEM, keyPEM := testcert.SelfSigned(t)
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}

	t.Run("SSL", func(t *testing.T) {
		c := newCluster(t, kfake.TLS(serverTLS), kfake.SeedTopics(4, "orders"))
		cfg := Config{BootstrapServers: c.ListenAddrs(), Security: Security{Protocol: ProtocolSSL, TLSCAPEM: certPEM}}
		got, err := TopicPartitions(t.Context(), cfg, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if got["orders"] != 4 {
			t.Errorf("orders: got %d partitions, want 4", got["orders"])
		}

		otherCA, _ := testcert.SelfSigned(t)
		cfg.Security.TLSCAPEM = otherCA
		_, err = TopicPartitions(t.Context(), cfg, testTimeout)
		var ue *UnreachableError
		if !errors.As(err, &ue) {
			t.Fatalf("untrusted server: got %v, want *UnreachableError", err)
		}
	})

	t.Run("SASL_SSL", func(t *testing.T) {
		c := newCluster(t, kfake.TLS(serverTLS), kfake.EnableSASL(), kfake.Superuser(MechanismScramSHA512, "admin", "secret"), kfake.SeedTopics(1, "orders"))
		cfg := Config{BootstrapServers: c.ListenAddrs(), Security: Security{
			Protocol: ProtocolSASLSSL, SASLMechanism: MechanismScramSHA512, SASLUsername: "admin", SASLPassword: "secret",
			TLSCAPEM: certPEM, TLSServerName: "127.0.0.1",
		}}
		got, err := TopicPartitions(t.Context(), cfg, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if got["orders"] != 1 {
			t.Errorf("orders: got %d partitions, want 1", got["orders"])
		}
	})
}

func TestOptsRejectsBadSettings(t *testing.T) {
	certPEM, keyPEM := testcert.SelfSigned(t)
	_, otherKey := testcert.SelfSigned(t)
	servers := []string{"127.0.0.1:9092"}
	tests := []struct {
		name string
		cfg  Config
		want string // error prefix; "" means valid
	}{
		{"plaintext", Config{BootstrapServers: servers}, ""},
		{"lower case protocol", Config{BootstrapServers: servers, Security: Security{Protocol: "sasl_plaintext", SASLMechanism: "plain", SASLUsername: "u"}}, ""},
		{"client cert", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCertPEM: certPEM, TLSKeyPEM: keyPEM}}, ""},
		{"no servers", Config{}, "bootstrap_servers:"},
		{"unknown protocol", Config{BootstrapServers: servers, Security: Security{Protocol: "TLS"}}, "security_protocol:"},
		{"no mechanism", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSASLSSL, SASLUsername: "u"}}, "sasl_mechanism:"},
		{"GSSAPI", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSASLSSL, SASLMechanism: "GSSAPI", SASLUsername: "u"}}, "sasl_mechanism:"},
		{"no username", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSASLSSL, SASLMechanism: MechanismPlain}}, "sasl_username:"},
		{"SASL without SASL protocol", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, SASLUsername: "u"}}, "sasl_username: set, but security_protocol SSL"},
		{"TLS without TLS protocol", Config{BootstrapServers: servers, Security: Security{TLSCAPEM: certPEM}}, "tls_ca_pem: set, but security_protocol PLAINTEXT"},
		{"CA not PEM", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCAPEM: "hello"}}, "tls_ca_pem: no certificate found"},
		{"CA broken", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCAPEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}}, "tls_ca_pem: certificate 1:"},
		{"cert without key", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCertPEM: certPEM}}, "tls_key_pem: required"},
		{"key given as cert", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCertPEM: keyPEM, TLSKeyPEM: keyPEM}}, "tls_cert_pem: no certificate found"},
		{"cert given as key", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCertPEM: certPEM, TLSKeyPEM: certPEM}}, "tls_key_pem: no private key found"},
		{"mismatched pair", Config{BootstrapServers: servers, Security: Security{Protocol: ProtocolSSL, TLSCertPEM: certPEM, TLSKeyPEM: otherKey}}, "tls_cert_pem, tls_key_pem:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.Opts()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("got error %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestSecurityRedacts(t *testing.T) {
	_, keyPEM := testcert.SelfSigned(t)
	s := Security{Protocol: ProtocolSASLSSL, SASLUsername: "admin", SASLPassword: "hunter2", TLSKeyPEM: keyPEM}
	var log strings.Builder
	slog.New(slog.NewTextHandler(&log, nil)).Info("connect", "security", s)
	for name, out := range map[string]string{"%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", s), "slog": log.String()} {
		if strings.Contains(out, "hunter2") || strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("%s leaks a secret: %s", name, out)
		}
		if !strings.Contains(out, "admin") {
			t.Errorf("%s lost the username: %s", name, out)
		}
	}
}

func TestSplitServers(t *testing.T) {
	got := SplitServers(" h1:9092, ,h2:9092,")
	if strings.Join(got, "|") != "h1:9092|h2:9092" {
		t.Errorf("got %q", got)
	}
}
