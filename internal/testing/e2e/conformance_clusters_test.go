package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
)

// The conformance suite's clusters: by default two kfake clusters in this
// process, each with SASL/SCRAM, so the same settings path as an
// operator's clusters is taken; with KMIRROR_CONFORMANCE_SOURCE_BOOTSTRAP
// and KMIRROR_CONFORMANCE_DESTINATION_BOOTSTRAP, the operator's own. Each
// cluster's settings are read from variables named as the server's
// KMIRROR_DESTINATION_* ones, under KMIRROR_CONFORMANCE_SOURCE_ and
// KMIRROR_CONFORMANCE_DESTINATION_ (docs/conformance.md lists them).
type conformance struct {
	src, dst kafkaconn.Config
	// external: the clusters are the operator's, not this process's.
	external bool
	// prefix starts the name of every topic, group and mirror the suite
	// makes, unique to the run.
	prefix string
	// replicationFactor of the topics the suite creates (-1: the
	// cluster's default).
	replicationFactor int16
}

const (
	conformanceEnv     = "KMIRROR_CONFORMANCE_"
	conformanceMech    = "SCRAM-SHA-256"
	conformanceUser    = "kmirror"
	conformancePassKey = "conformance-secret"
)

// conformanceClusters returns the clusters the suite runs against, started
// for the test when none are named.
func conformanceClusters(t *testing.T) *conformance {
	t.Helper()
	c := &conformance{replicationFactor: -1, prefix: os.Getenv(conformanceEnv + "PREFIX")}
	if c.prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.prefix = "kmc-" + hex.EncodeToString(b[:]) + "-"
	}
	if v := os.Getenv(conformanceEnv + "REPLICATION_FACTOR"); v != "" {
		rf, err := strconv.ParseInt(v, 10, 16)
		if err != nil {
			t.Fatalf("%sREPLICATION_FACTOR=%q: %v", conformanceEnv, v, err)
		}
		c.replicationFactor = int16(rf)
	}
	srcSet, dstSet := os.Getenv(conformanceEnv+"SOURCE_BOOTSTRAP") != "", os.Getenv(conformanceEnv+"DESTINATION_BOOTSTRAP") != ""
	switch {
	case srcSet && dstSet:
		var err error
		if c.src, err = clusterFromEnv(conformanceEnv + "SOURCE_"); err != nil {
			t.Fatal(err)
		}
		if c.dst, err = clusterFromEnv(conformanceEnv + "DESTINATION_"); err != nil {
			t.Fatal(err)
		}
		c.external = true
		t.Logf("conformance: source %s (%s), destination %s (%s), names under %q",
			strings.Join(c.src.BootstrapServers, ","), c.src.Security, strings.Join(c.dst.BootstrapServers, ","), c.dst.Security, c.prefix)
	case srcSet || dstSet:
		t.Fatalf("set both %sSOURCE_BOOTSTRAP and %sDESTINATION_BOOTSTRAP, or neither (kfake)", conformanceEnv, conformanceEnv)
	default:
		secure := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser(conformanceMech, conformanceUser, conformancePassKey)}
		clusters, err := devcluster.Start(devcluster.Config{SourceOpts: secure, DestinationOpts: secure})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(clusters.Close)
		sec := kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: conformanceMech,
			SASLUsername: conformanceUser, SASLPassword: conformancePassKey}
		c.src = kafkaconn.Config{BootstrapServers: []string{clusters.SourceAddr()}, Security: sec}
		c.dst = kafkaconn.Config{BootstrapServers: []string{clusters.DestinationAddr()}, Security: sec}
	}
	return c
}

// clusterFromEnv reads one cluster's settings from the variables under
// prefix: BOOTSTRAP, SECURITY_PROTOCOL, SASL_MECHANISM, SASL_USERNAME,
// SASL_PASSWORD, the AWS_* and SASL_OAUTHBEARER_* ones (saslFromEnv),
// TLS_SERVER_NAME, and TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE (files
// of PEM).
func clusterFromEnv(prefix string) (kafkaconn.Config, error) {
	c := kafkaconn.Config{
		BootstrapServers: kafkaconn.SplitServers(os.Getenv(prefix + "BOOTSTRAP")),
		Security: kafkaconn.Security{
			Protocol:      cmpOr(os.Getenv(prefix+"SECURITY_PROTOCOL"), "PLAINTEXT"),
			SASLMechanism: os.Getenv(prefix + "SASL_MECHANISM"),
			SASLUsername:  os.Getenv(prefix + "SASL_USERNAME"),
			SASLPassword:  os.Getenv(prefix + "SASL_PASSWORD"),
			TLSServerName: os.Getenv(prefix + "TLS_SERVER_NAME"),
		},
	}
	saslFromEnv(prefix, &c.Security)
	for name, dst := range map[string]*string{"TLS_CA_FILE": &c.Security.TLSCAPEM,
		"TLS_CERT_FILE": &c.Security.TLSCertPEM, "TLS_KEY_FILE": &c.Security.TLSKeyPEM} {
		if path := os.Getenv(prefix + name); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return c, fmt.Errorf("%s%s: %w", prefix, name, err)
			}
			*dst = string(b)
		}
	}
	return c, c.Validate()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// serverEnv is the environment that gives a `kmirror server` the
// destination's settings, the files it needs written under dir.
func (c *conformance) serverEnv(t testing.TB, dir string) []string {
	s := c.dst.Security
	env := []string{
		"KMIRROR_DESTINATION_SECURITY_PROTOCOL=" + cmpOr(s.Protocol, "PLAINTEXT"),
		"KMIRROR_DESTINATION_SASL_MECHANISM=" + s.SASLMechanism,
		"KMIRROR_DESTINATION_SASL_USERNAME=" + s.SASLUsername,
		"KMIRROR_DESTINATION_SASL_PASSWORD=" + s.SASLPassword,
		"KMIRROR_DESTINATION_TLS_SERVER_NAME=" + s.TLSServerName,
	}
	env = append(env, saslServerEnv(s)...)
	for name, pem := range map[string]string{"CA": s.TLSCAPEM, "CERT": s.TLSCertPEM, "KEY": s.TLSKeyPEM} {
		if pem == "" {
			continue
		}
		path := dir + "/destination-" + strings.ToLower(name) + ".pem"
		if err := os.WriteFile(path, []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "KMIRROR_DESTINATION_TLS_"+name+"_FILE="+path)
	}
	return env
}

// sourceSpec is the mirror's source as topics:add's POST /v1/mirrors wants
// it, for the cluster cl.
func sourceSpec(cl kafkaconn.Config) map[string]any {
	s := cl.Security
	spec := map[string]any{"bootstrap_servers": strings.Join(cl.BootstrapServers, ",")}
	for k, v := range map[string]string{"security_protocol": s.Protocol, "sasl_mechanism": s.SASLMechanism,
		"sasl_username": s.SASLUsername, "sasl_password": s.SASLPassword, "tls_server_name": s.TLSServerName,
		"tls_ca_pem": s.TLSCAPEM, "tls_cert_pem": s.TLSCertPEM, "tls_key_pem": s.TLSKeyPEM} {
		if v != "" {
			spec[k] = v
		}
	}
	saslSourceSpec(s, spec)
	return spec
}

// client is a client of cl for the test's own reads and writes.
func client(t testing.TB, cl kafkaconn.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := cl.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// createTopic creates topic on cl with configs, and deletes it when the
// test ends (a removed mirror leaves its destination topic behind, so the
// destination's is deleted too).
func (c *conformance) createTopic(t testing.TB, cl kafkaconn.Config, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(client(t, cl))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, c.replicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() { c.deleteTopic(t, topic) })
}

// deleteTopic deletes topic from both clusters, where it is.
func (c *conformance) deleteTopic(t testing.TB, topic string) {
	for _, cl := range []kafkaconn.Config{c.src, c.dst} {
		cli, err := cl.NewClient()
		if err != nil {
			t.Errorf("delete %s: %v", topic, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := kadm.NewClient(cli).DeleteTopics(ctx, topic)
		cancel()
		cli.Close()
		if err == nil {
			for _, r := range resp {
				if r.Err != nil && !strings.Contains(r.Err.Error(), "UNKNOWN_TOPIC") {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Errorf("delete %s from %s: %v", topic, strings.Join(cl.BootstrapServers, ","), err)
		}
	}
}

// deleteGroup deletes group from both clusters, where it is.
func (c *conformance) deleteGroup(t testing.TB, group string) {
	for _, cl := range []kafkaconn.Config{c.src, c.dst} {
		cli, err := cl.NewClient()
		if err != nil {
			t.Errorf("delete group %s: %v", group, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, _ = kadm.NewClient(cli).DeleteGroups(ctx, group) // absent is fine
		cancel()
		cli.Close()
	}
}
