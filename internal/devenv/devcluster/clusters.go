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
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
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

	// SourceBrokers is how many brokers the source has (0 means one; more
	// need SourcePort 0). With one, a consumer's fetches go one at a time.
	SourceBrokers int
	// BlackholeDestination makes the destination discard what is produced
	// to it (offsets still advance), so a throughput benchmark measures the
	// copier, not kfake's storage.
	BlackholeDestination bool

	// DataDir, when set, keeps each cluster's data on disk under it, so
	// Up can bring a cluster back with its records after Down (fault
	// tests).
	DataDir string

	// Process runs both clusters in a child process (this binary
	// re-executed; its TestMain must call ServeIfChild), so that a
	// benchmark's CPU and memory figures are kmirror's alone. The
	// clusters are then reached only over the network: Source and
	// Destination are nil, and Down, Up and StartDemo refuse. Of the other
	// fields it takes only SourceBrokers and BlackholeDestination.
	Process bool
}

// Clusters is a running source and destination pair. Close stops both, and
// any demo traffic first.
type Clusters struct {
	// Source and Destination are the in-process clusters; nil with
	// Config.Process.
	Source      *kfake.Cluster
	Destination *kfake.Cluster
	// proc is the clusters' child process with Config.Process.
	proc *Process

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
	if cfg.SourceBrokers < 0 || cfg.SourceBrokers > 1 && cfg.SourcePort != 0 {
		return nil, errors.New("devcluster: SourceBrokers must be 0 or more, and more than one needs SourcePort 0")
	}
	if v := os.Getenv(KafkaVersionEnv); v != "" && kversion.FromString(v) == nil {
		return nil, fmt.Errorf("devcluster: %s=%q is no Apache Kafka release kversion knows (2.8, 3.9, 4.0, ...)", KafkaVersionEnv, v)
	}
	if cfg.Process {
		return startProcess(cfg)
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
	c := newClusters(cfg, src, dst, map[string]int{"source": portOf(src), "destination": portOf(dst)}, nil)
	logger.Info("dev kafka clusters started", "source", c.SourceAddr(), "destination", c.DestinationAddr())
	return c, nil
}

func newClusters(cfg Config, src, dst *kfake.Cluster, ports map[string]int, proc *Process) *Clusters {
	ctx, cancel := context.WithCancel(context.Background())
	return &Clusters{Source: src, Destination: dst, proc: proc, logger: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		cfg: cfg, ctx: ctx, cancel: cancel, ports: ports}
}

// Process is the clusters' child process with Config.Process, else nil.
func (c *Clusters) Process() *Process { return c.proc }

// errProcess is what the in-process operations say with Config.Process.
var errProcess = errors.New("devcluster: the clusters run in a child process (Config.Process)")

// KafkaVersionEnv names the Apache Kafka release both clusters speak like
// (kfake.MaxVersions: its request versions, no newer), for the tests'
// broker-version matrix (docs/conformance.md); unset, kfake's newest.
const KafkaVersionEnv = "KMIRROR_TEST_KAFKA_VERSION"

// opts adds the role's data directory, brokers, blackhole and Kafka
// version to its options.
func (c Config) opts(role string, extra []kfake.Opt) []kfake.Opt {
	var opts []kfake.Opt
	if v := kversion.FromString(os.Getenv(KafkaVersionEnv)); v != nil {
		opts = append(opts, kfake.MaxVersions(v))
	}
	if c.DataDir != "" {
		opts = append(opts, kfake.DataDir(filepath.Join(c.DataDir, role)))
	}
	if role == "source" && c.SourceBrokers > 1 {
		opts = append(opts, kfake.Ports(make([]int, c.SourceBrokers)...)) // each on a port of the kernel's choosing
	}
	if role == "destination" && c.BlackholeDestination {
		opts = append(opts, kfake.BlackholeProduce())
	}
	return append(opts, extra...)
}

func portOf(cl *kfake.Cluster) int {
	_, p, _ := net.SplitHostPort(cl.ListenAddrs()[0])
	n, _ := strconv.Atoi(p)
	return n
}

// Down stops the "source" or "destination" cluster, as an outage: its
// clients see refused connections until Up.
func (c *Clusters) Down(role string) error {
	if c.proc != nil {
		return errProcess
	}
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
	if c.proc != nil {
		return errProcess
	}
	if c.cfg.DataDir == "" {
		return errors.New("devcluster: Up needs Config.DataDir")
	}
	return c.start(role)
}

// start starts a stopped cluster again on its port.
func (c *Clusters) start(role string) error {
	if role == "source" && c.cfg.SourceBrokers > 1 {
		return errors.New("devcluster: Up cannot bring back a source of several brokers on its ports")
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

// UpEmpty restarts a cluster that Down stopped, on the same port but with
// none of its data: a rebuilt cluster, or one whose disks were replaced
// (fault tests). It works with or without Config.DataDir.
func (c *Clusters) UpEmpty(role string) error {
	if c.proc != nil {
		return errProcess
	}
	if c.cfg.DataDir != "" {
		if err := os.RemoveAll(filepath.Join(c.cfg.DataDir, role)); err != nil {
			return err
		}
	}
	return c.start(role)
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
		if c.proc != nil {
			c.proc.close()
			return
		}
		c.Source.Close()
		c.Destination.Close()
	})
}
