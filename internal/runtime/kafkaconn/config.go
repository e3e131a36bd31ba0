// Package kafkaconn builds franz-go clients for a Kafka cluster from
// Kafka-style connection settings (bootstrap servers, security.protocol,
// sasl.mechanism, PEM material).
package kafkaconn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is how to reach one Kafka cluster.
type Config struct {
	BootstrapServers []string // host:port
	Security         Security
}

// SplitServers splits a Kafka bootstrap.servers string ("h1:9092,h2:9092"),
// dropping blanks.
func SplitServers(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Validate reports what Opts would reject, without connecting.
func (c Config) Validate() error {
	_, err := c.Opts()
	return err
}

// Opts returns the client options for c: seed brokers, SASL and TLS dialing.
//
// Clients never push KIP-714 client telemetry to the brokers: kmirror keeps
// two clients per mirror and has its own metrics on /metrics, while each
// push builds a fresh gzip compressor (about 1 MB). Against a broker that
// asks every 30 s, pushing would be a sixth of an idle instance's CPU
// profile (docs/benchmarks/idle.md, "Idle cost").
func (c Config) Opts() ([]kgo.Opt, error) {
	if len(c.BootstrapServers) == 0 {
		return nil, errors.New("bootstrap_servers: at least one host:port required")
	}
	for _, s := range c.BootstrapServers {
		if strings.TrimSpace(s) == "" {
			return nil, errors.New("bootstrap_servers: empty entry")
		}
	}
	sec, err := c.Security.opts()
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapServers...), kgo.DisableClientMetrics(),
		kgo.MaxVersions(ProtocolVersions())}, sec...), nil
}

// NewClient returns a kgo client for c; extra options (consumer, producer,
// logger) are applied after c's own. The caller closes it.
func (c Config) NewClient(extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.Opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", strings.Join(c.BootstrapServers, ","), err)
	}
	return cl, nil
}

// NewAdmin returns an admin client that owns its own kgo client: the caller's
// Close on the returned kadm.Client closes both.
func (c Config) NewAdmin(extra ...kgo.Opt) (*kadm.Client, error) {
	cl, err := c.NewClient(extra...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}
