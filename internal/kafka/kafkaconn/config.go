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

	"kmirror/internal/kafka/recordbatch"
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
// push builds a fresh gzip compressor: against a broker that asks for them,
// pushing would be a large part of an idle instance's CPU.
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
		kgo.MaxVersions(ProtocolVersions()), kgo.WithDecompressor(decompressor),
		kgo.BrokerMaxReadBytes(maxResponseBytes)}, sec...), nil
}

// A cluster's bytes are input (a source may be hostile), so every client
// bounds what kgo reads of them, below kgo's defaults. kgo allocates a
// response's claimed size before reading it: maxResponseBytes is kgo's
// fetch max bytes (50 MiB, which no client here raises) and 1 MiB for the
// rest. And a batch that kgo's consumer decompresses (alignment reading
// records back, the state topic, heartbeats) stops at the bound of the
// batches kmirror decodes itself, not kgo's 1 GiB.
const maxResponseBytes = 50<<20 + 1<<20

// decompressor is every client's, shared (it pools its decoders).
var decompressor = recordbatch.NewDecompressor(recordbatch.DefaultMaxInflated)

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
