// Package devcluster runs the two in-process Kafka clusters (source and
// destination) behind `kmirror dev` and the tests, plus optional demo
// traffic on the source.
package devcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config says where the clusters listen. Ports are on 127.0.0.1; 0 picks a
// free one (tests), `kmirror dev` passes 19092 and 29092.
type Config struct {
	SourcePort      int
	DestinationPort int
	Logger          *slog.Logger // nil discards; kfake's chatter is logged at debug

	// SourceOpts and DestinationOpts are appended to each cluster's kfake
	// options, for tests that need SASL, ACLs or more brokers.
	SourceOpts      []kfake.Opt
	DestinationOpts []kfake.Opt

	// DataDir, when set, keeps each cluster's data on disk under it, so
	// Up can bring a cluster back with its records after Down (fault
	// tests).
	DataDir string
}

// Clusters is a running source and destination pair. Close stops both, and
// any demo traffic first.
type Clusters struct {
	Source      *kfake.Cluster
	Destination *kfake.Cluster

	logger *slog.Logger
	cfg    Config
	// ports are where the clusters listen, kept for Up: a closed kfake
	// cluster no longer answers ListenAddrs.
	ports map[string]int

	mu     sync.Mutex // StartDemo holds it; Close takes it to cancel
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Start starts both clusters, one broker each.
func Start(cfg Config) (*Clusters, error) {
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.SourcePort < 0 || cfg.DestinationPort < 0 {
		return nil, errors.New("devcluster: ports must be 0 (any free port) or positive")
	}
	src, err := newCluster("source", cfg.SourcePort, logger, cfg.opts("source", cfg.SourceOpts))
	if err != nil {
		return nil, err
	}
	dst, err := newCluster("destination", cfg.DestinationPort, logger, cfg.opts("destination", cfg.DestinationOpts))
	if err != nil {
		src.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Clusters{Source: src, Destination: dst, logger: logger, cfg: cfg, ctx: ctx, cancel: cancel,
		ports: map[string]int{"source": portOf(src), "destination": portOf(dst)}}
	logger.Info("dev kafka clusters started", "source", c.SourceAddr(), "destination", c.DestinationAddr())
	return c, nil
}

// opts adds the role's data directory to its options.
func (c Config) opts(role string, extra []kfake.Opt) []kfake.Opt {
	if c.DataDir == "" {
		return extra
	}
	return append([]kfake.Opt{kfake.DataDir(filepath.Join(c.DataDir, role))}, extra...)
}

func portOf(cl *kfake.Cluster) int {
	_, p, _ := net.SplitHostPort(cl.ListenAddrs()[0])
	n, _ := strconv.Atoi(p)
	return n
}

// Down stops the "source" or "destination" cluster, as an outage: its
// clients see refused connections until Up.
func (c *Clusters) Down(role string) error {
	switch role {
	case "source":
		c.Source.Close()
	case "destination":
		c.Destination.Close()
	default:
		return fmt.Errorf("devcluster: no cluster %q", role)
	}
	return nil
}

// Up restarts a cluster that Down stopped, on the same port and with the
// same data; it needs Config.DataDir.
func (c *Clusters) Up(role string) error {
	if c.cfg.DataDir == "" {
		return errors.New("devcluster: Up needs Config.DataDir")
	}
	extra := c.cfg.SourceOpts
	if role == "destination" {
		extra = c.cfg.DestinationOpts
	}
	cl, err := newCluster(role, c.ports[role], c.logger, c.cfg.opts(role, extra))
	if err != nil {
		return err
	}
	if role == "source" {
		c.Source = cl
	} else {
		c.Destination = cl
	}
	return nil
}

func newCluster(role string, port int, logger *slog.Logger, extra []kfake.Opt) (*kfake.Cluster, error) {
	opts := append([]kfake.Opt{
		kfake.Ports(port),
		kfake.ClusterID("kmirror-dev-" + role),
		kfake.WithLogger(kfakeLogger{logger.With("cluster", role)}),
	}, extra...)
	cl, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("devcluster: start %s cluster on 127.0.0.1:%d: %w", role, port, err)
	}
	return cl, nil
}

// SourceAddr is the source's bootstrap address, host:port.
func (c *Clusters) SourceAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports["source"]))
}

// DestinationAddr is the destination's bootstrap address, host:port.
func (c *Clusters) DestinationAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports["destination"]))
}

// Close stops the demo goroutines, waits for them to exit, then shuts both
// clusters down. Clients are closed while the brokers still answer, so a
// consumer leaves its group cleanly instead of retrying against a dead
// port. Safe to call more than once.
func (c *Clusters) Close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.cancel()
		c.mu.Unlock()
		c.wg.Wait()
		c.Source.Close()
		c.Destination.Close()
	})
}
