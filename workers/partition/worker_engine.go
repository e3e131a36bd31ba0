package partition

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
	"kmirror/workers/partition/worker"
)

// workerEngine is the Engine as its workers see it: the worker.Engine each
// worker is given. Its methods only name the engine's own for the
// interface, so the Engine's exported API stays what the lease manager and
// the server use.
type workerEngine struct{ e *Engine }

var _ worker.Engine = workerEngine{}

func (h workerEngine) Desire(mirror, topic string) (worker.Desire, bool) {
	return h.e.desired.get(mirror, topic)
}

func (h workerEngine) DesiresChanged() <-chan struct{} { return h.e.desired.updated() }

func (h workerEngine) RefreshDesires(ctx context.Context) error { return h.e.desired.refresh(ctx) }

func (h workerEngine) Prepare(ctx context.Context) (release func(), err error) {
	return h.e.prep.acquire(ctx)
}

func (h workerEngine) TakeOver(ctx context.Context) (release func(), err error) {
	return h.e.takeovers.acquire(ctx)
}

func (h workerEngine) Row(id repo.PartitionID) (repo.Partition, error) { return h.e.rows.do(id) }

func (h workerEngine) Transition(t service.PartitionTransition) (repo.Partition, error) {
	return h.e.states.do(t)
}

func (h workerEngine) Realign(r service.PartitionRealignment) (repo.Partition, error) {
	return h.e.realigns.do(r)
}

func (h workerEngine) Source(ctx context.Context, mirror string) (*worker.Source, error) {
	s, err := h.e.source(ctx, mirror)
	if err != nil {
		return nil, err
	}
	return &s.Source, nil
}

func (h workerEngine) SourceOffsets(ctx context.Context, src *worker.Source, topic string, partition int32, committed bool) (kafkaconn.PartitionOffsets, error) {
	return h.e.partitionOffsets(ctx, src.Admin, topic, partition, committed)
}

func (h workerEngine) DestinationOffsets(ctx context.Context, dstTopic string, partition int32) (kafkaconn.PartitionOffsets, error) {
	return h.e.partitionOffsets(ctx, h.e.dstAdmin, dstTopic, partition, false)
}

func (h workerEngine) ReadRecords(ctx context.Context, src *worker.Source, mirror, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error) {
	if src == nil {
		return h.e.reads.read(ctx, "dst", h.e.cfg.Destination, false, nil, topic, partition, from, end, n)
	}
	return h.e.reads.read(ctx, "src/"+mirror, src.Conn, true, h.e.cfg.SourceOpts, topic, partition, from, end, n)
}

func (h workerEngine) SourceTopicID(ctx context.Context, src *worker.Source, topic string) (worker.SourceTopic, error) {
	return h.e.sourceTopicID(ctx, src.Client, topic)
}

func (h workerEngine) SourceState(ctx context.Context, mirror string, conn kafkaconn.Config) (service.StateSnapshot, error) {
	return h.e.sourceState(ctx, mirror, conn)
}

func (h workerEngine) TopicState(ctx context.Context, mirror, topic string) (repo.TopicWorkerState, error) {
	return h.e.topicState(ctx, mirror, topic)
}

func (h workerEngine) WriteTopicRow(ctx context.Context, f repo.LeaseFence, what string,
	write func(ctx context.Context, f repo.LeaseFence) ([]byte, error)) ([]byte, error) {
	return h.e.writeTopicRow(ctx, f, what, write)
}

// EnsureDestinationTopic is ensureDestinationTopic shared with the topic's
// partitions that ask while it runs (join): each then knows whether the
// topic is new. They are joined by the destination name, which one mirror
// topic writes.
func (h workerEngine) EnsureDestinationTopic(ctx context.Context, src *worker.Source, mirror, srcTopic, dstTopic string,
	replicationFactor int16) (worker.DestinationTopic, error) {
	return h.e.shared.dstTopics.join(ctx, dstTopic, func(ctx context.Context) (worker.DestinationTopic, error) {
		return h.e.ensureDestinationTopic(ctx, src, mirror, srcTopic, dstTopic, replicationFactor)
	})
}

func (h workerEngine) RecreateDestinationTopic(ctx context.Context, dstTopic string, partitions int32, replicationFactor int16) error {
	return h.e.recreateDestinationTopic(ctx, dstTopic, partitions, replicationFactor)
}

func (h workerEngine) ReadOnlyACL(ctx context.Context, dstTopic string, on bool) error {
	if on {
		return h.e.addReadOnlyACL(ctx, dstTopic)
	}
	return h.e.deleteReadOnlyACL(ctx, dstTopic)
}

func (h workerEngine) EnforcesACLs(ctx context.Context) bool { return h.e.authorizer.enforces(ctx) }

func (h workerEngine) AwaitSettled(ctx context.Context, k lease.Key, waiting func(copies int64, since time.Time)) error {
	return h.e.awaitSettled(ctx, k, waiting)
}

func (h workerEngine) KeepUnsettled(k lease.Key, dstTopic string, acks *batchproduce.Acks, end int64) {
	h.e.keepUnsettled(k, dstTopic, acks, end)
}

// AddSession puts a running session where the destination watch finds it
// (destination_watch.go), until remove.
func (h workerEngine) AddSession(k lease.Key, s *worker.Session) (remove func()) {
	e := h.e
	e.mu.Lock()
	e.sessions[k] = s
	e.mu.Unlock()
	e.copy.copying(k.Mirror, 1)
	return func() {
		e.copy.copying(k.Mirror, -1)
		e.mu.Lock()
		if e.sessions[k] == s {
			delete(e.sessions, k)
		}
		e.mu.Unlock()
	}
}

func (h workerEngine) Recompression(mirror string) (recordbatch.Codec, bool) {
	return h.e.copy.recompression(mirror)
}

func (h workerEngine) Throttle(ctx context.Context, done <-chan struct{}, k lease.Key, size func() int64) (time.Duration, error) {
	return h.e.copy.wait(ctx, done, k, size)
}

func (h workerEngine) TakeLoss(k lease.Key) (worker.Loss, bool) {
	l, ok := h.e.takeLoss(k)
	return worker.Loss{Msg: l.msg, DestinationEnd: l.end}, ok
}

func (h workerEngine) WriteOff(dstTopic, why string) { h.e.writeOff(dstTopic, why) }

// Fetch adds the partition to its mirror's fetcher, made on first use and
// closed when its last partition leaves.
func (h workerEngine) Fetch(mirror string, conn kafkaconn.Config, topic string, partition int32, from int64,
	deliver func(worker.FetchBatch)) (worker.Fetch, error) {
	return h.e.fetchBatches(mirror, conn, topic, partition, from, deliver)
}

func (h workerEngine) ProduceBatch(ctx context.Context, dstTopic string, partition int32, b batchproduce.Payload,
	promise func(batchproduce.Result)) {
	h.e.produceBatch(ctx, dstTopic, partition, b, promise)
}

func (h workerEngine) ProducerTrouble(dstTopic string, partition int32) (time.Time, error) {
	return oldestTrouble(
		func() (time.Time, error) { return h.e.producerHealth.trouble(troubleAfter) },
		func() (time.Time, error) { return h.e.producerRetrying(dstTopic, partition) })
}

func (h workerEngine) RefreshProducerMetadata() {
	h.e.batchProducer.RefreshMetadata()
}

func (h workerEngine) HealthChanged() <-chan struct{} { return h.e.health.updated() }
