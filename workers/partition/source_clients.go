package partition

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/partition/worker"
)

// sourceLookup is the engine's source, as the workers' worker.Sources.
type sourceLookup func(ctx context.Context, mirror string) (*sourceClients, error)

func (f sourceLookup) Source(ctx context.Context, mirror string) (worker.Source, error) {
	s, err := f(ctx, mirror)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// source returns the mirror's source admin and config, reconnecting when the
// mirror's connection changed. The mirror's row is read afresh, but shared
// with the partitions that ask at the same time: at 10,000 partitions
// preparing at once, one read each would be a seventh of the data pool's
// statements.
func (e *Engine) source(ctx context.Context, mirror string) (*sourceClients, error) {
	m, err := e.shared.mirrors.do(ctx, mirror, func(ctx context.Context) (repo.Mirror, error) {
		return repo.MirrorsGet(ctx, e.cfg.Pool, mirror)
	})
	if err != nil {
		return nil, fmt.Errorf("load mirror %s: %w", mirror, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sources[mirror]; s != nil {
		if s.key == m.UpdatedAt {
			return s, nil
		}
		s.close()
		delete(e.sources, mirror)
	}
	// Opened only for a new client: a server waiting for a rotated secret
	// key keeps its partitions going on the clients it has.
	conn, err := e.cfg.Service.SourceConn(m)
	if err != nil {
		return nil, err
	}
	cl, err := conn.NewClient(append([]kgo.Opt{kgo.MetadataMinAge(250 * time.Millisecond)}, e.cfg.SourceOpts...)...)
	if err != nil {
		return nil, err
	}
	s := &sourceClients{mirror: mirror, Conn: conn, Client: cl, Admin: kadm.NewClient(cl), key: m.UpdatedAt,
		opts: e.cfg.SourceOpts, destination: e.cfg.Destination, shared: &e.shared, reads: e.reads, fetchers: e.fetchers,
		states: &e.srcStates, pool: e.cfg.Pool, log: e.log}
	e.sources[mirror] = s
	return s, nil
}

// sourceClients is a mirror's source connection and clients, made for the
// mirror row last updated at key: the worker.Source its partitions read.
type sourceClients struct {
	mirror string
	Conn   kafkaconn.Config
	// Client is for requests that must not be answered from kgo's
	// metadata cache.
	Client *kgo.Client
	Admin  *kadm.Client
	key    time.Time
	// opts are the sources' extra client options (tests); destination is
	// the destination's connection, which a continuation's proof reads.
	opts        []kgo.Opt
	destination kafkaconn.Config
	shared      *sharedReads
	reads       *recordReads
	fetchers    *fetchers
	states      *sourceStates
	pool        *pgxpool.Pool
	log         *slog.Logger
}

func (s *sourceClients) close() { s.Admin.Close() }

// Offsets returns a source partition's offsets from a listing of its whole
// topic shared with its other partitions.
func (s *sourceClients) Offsets(ctx context.Context, topic string, partition int32, committed bool) (kafkaconn.PartitionOffsets, error) {
	return s.shared.partitionOffsets(ctx, s.Admin, topic, partition, committed)
}

// Topic asks the source for a topic's id and partitions with a raw metadata
// request, shared with the topic's other partitions.
func (s *sourceClients) Topic(ctx context.Context, topic string) (worker.SourceTopic, error) {
	return s.shared.sourceTopicID(ctx, s.Client, topic)
}

// Records reads up to n committed records of a source partition in [from,
// end), with the mirror's other partitions' reads of the moment
// (record_reads.go).
func (s *sourceClients) Records(ctx context.Context, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error) {
	return s.reads.read(ctx, "src/"+s.mirror, s.Conn, true, s.opts, topic, partition, from, end, n)
}

// MirrorState returns the source cluster's decoded __mirror_state.
func (s *sourceClients) MirrorState(ctx context.Context) (service.StateSnapshot, error) {
	return s.states.get(ctx, s.mirror, s.Conn)
}

// Spec is what a destination topic mirroring source topic topic is created
// with: the source's partition count and its synced configs.
func (s *sourceClients) Spec(ctx context.Context, topic string) (worker.TopicSpec, error) {
	st, err := s.Admin.ListTopics(ctx, topic)
	if err != nil {
		return worker.TopicSpec{}, fmt.Errorf("describe source topic: %v", err)
	}
	sd, ok := st[topic]
	if !ok || sd.Err != nil {
		return worker.TopicSpec{}, fmt.Errorf("source topic %s does not exist", topic)
	}
	return worker.TopicSpec{Partitions: len(sd.Partitions), Configs: s.syncedTopicConfigs(ctx, topic)}, nil
}

// syncedTopicConfigs are the configs a destination topic is created with:
// source topic topic's dynamic ones less the mirror's topic.properties.exclude,
// as the metadata sync would set them, so that a topic created again after
// the destination lost it has its retention and compaction from the first
// record. When they cannot be read the topic is created with the broker's
// defaults, and the next sync pass sets them.
func (s *sourceClients) syncedTopicConfigs(ctx context.Context, topic string) map[string]*string {
	mirror := s.mirror
	m, err := s.shared.mirrors.do(ctx, mirror, func(ctx context.Context) (repo.Mirror, error) {
		return repo.MirrorsGet(ctx, s.pool, mirror)
	})
	var cfg service.SyncConfig
	if err == nil {
		cfg, err = service.ParseSyncConfig(m.Config)
	}
	var rcs kadm.ResourceConfigs
	if err == nil {
		rcs, err = s.Admin.DescribeTopicConfigs(ctx, topic)
	}
	var rc kadm.ResourceConfig
	if err == nil {
		rc, err = rcs.On(topic, nil)
	}
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		s.log.Warn("creating a destination topic with the broker's default configs; the next metadata sync sets the source's",
			"mirror", mirror, "topic", topic, "err", err)
		return nil
	}
	out := map[string]*string{}
	for k, v := range kafkaconn.DynamicTopicConfigs(rc, cfg.PropertyExcluded) {
		out[k] = &v
	}
	return out
}

// ProveContinuation proves in against this source and the destination.
func (s *sourceClients) ProveContinuation(ctx context.Context, in service.ContinuationInput) (service.PartitionContinuation, error) {
	in.Source, in.SourceAdmin, in.SourceOpts, in.Destination = s.Conn, s.Admin, s.opts, s.destination
	return service.ProveContinuation(ctx, in)
}

// Fetch adds the partition to its mirror's fetcher, made on first use and
// closed when its last partition leaves.
func (s *sourceClients) Fetch(topic string, partition int32, from int64, deliver func(worker.FetchBatch)) (worker.Fetch, error) {
	return s.fetchers.fetch(s.mirror, s.Conn, topic, partition, from, deliver)
}
