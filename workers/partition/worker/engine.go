package worker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
)

// Engine is what a Worker needs of the engine that runs it: the state the
// instance's workers share, the statements and reads they make together,
// and the Kafka clients they share. The engine (workers/partition)
// implements it; a worker reaches nothing else of the engine. Errors that
// are not this package's failures fail the partition retryably, with
// their message.
type Engine interface {
	// Desire returns a topic's desired state from the engine's cache; ok
	// is false for a topic the cache does not hold.
	Desire(mirror, topic string) (d Desire, ok bool)
	// DesiresChanged returns a channel closed at the next change of any
	// desired state.
	DesiresChanged() <-chan struct{}
	// RefreshDesires re-reads every desired state now.
	RefreshDesires(ctx context.Context) error

	// Prepare waits for one of the slots that bound how many partitions
	// prepare or read records back to align at once.
	Prepare(ctx context.Context) (release func(), err error)
	// TakeOver waits for one of the wider slots that bound how many
	// partitions load their row and re-align after a new lease at once;
	// a re-alignment that reads records back takes a Prepare slot too.
	TakeOver(ctx context.Context) (release func(), err error)
	// Row reads a partition's row, and Transition writes one state change
	// through the service (state machine, fencing, event and outbox), each
	// in one statement with the other workers' of the moment. Neither takes
	// a context: each statement has its own timeout.
	Row(id repo.PartitionID) (repo.Partition, error)
	Transition(t service.PartitionTransition) (repo.Partition, error)
	// Realign records a realignment (the state kept, a new checkpoint,
	// its event), in one statement with the other workers' of the moment.
	Realign(r service.PartitionRealignment) (repo.Partition, error)

	// Source returns the mirror's source cluster, read from its row afresh
	// (shared with the partitions that ask at the same time).
	Source(ctx context.Context, mirror string) (*Source, error)
	// SourceOffsets and DestinationOffsets return a partition's start and
	// end offsets from a listing of its whole topic, shared with its other
	// partitions; committed ends are the source's last stable offsets.
	// Each takes the topic's name on its own cluster: dstTopic is the
	// destination's (Desire.DestTopic).
	SourceOffsets(ctx context.Context, src *Source, topic string, partition int32, committed bool) (kafkaconn.PartitionOffsets, error)
	DestinationOffsets(ctx context.Context, dstTopic string, partition int32) (kafkaconn.PartitionOffsets, error)
	// ReadRecords reads up to n records of a partition from offset from,
	// below end, as kafkaconn.ReadRecords does: on the mirror's source
	// (src, read_committed) or, with src nil, on the destination (topic is
	// then the destination's name). The reads of a cluster asked at the
	// same time share one client and its fetches.
	ReadRecords(ctx context.Context, src *Source, mirror, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error)
	// SourceTopicID asks the source for a topic's id, bypassing kgo's
	// metadata cache.
	SourceTopicID(ctx context.Context, src *Source, topic string) (SourceTopic, error)
	// SourceState returns the decoded __mirror_state of the mirror's
	// source cluster (a failback's proof).
	SourceState(ctx context.Context, mirror string, conn kafkaconn.Config) (service.StateSnapshot, error)
	// TopicState reads what the workers recorded on a topic's row, and
	// WriteTopicRow makes a fenced write of it once for the topic's
	// partitions that make the same write (what) meanwhile.
	TopicState(ctx context.Context, mirror, topic string) (repo.TopicWorkerState, error)
	WriteTopicRow(ctx context.Context, f repo.LeaseFence, what string,
		write func(ctx context.Context, f repo.LeaseFence) ([]byte, error)) ([]byte, error)

	// EnsureDestinationTopic creates destination topic dstTopic, with
	// the partition count and configs of source topic srcTopic, when it is
	// missing; the topic's partitions that ask while it runs share its
	// outcome.
	EnsureDestinationTopic(ctx context.Context, src *Source, mirror, srcTopic, dstTopic string, replicationFactor int16) (DestinationTopic, error)
	// RecreateDestinationTopic drops destination topic dstTopic, creates it
	// again once the deletion is done, and writes off the producer's
	// copies to the old one.
	RecreateDestinationTopic(ctx context.Context, dstTopic string, partitions int32, replicationFactor int16) error
	// ReadOnlyACL adds (on) or deletes destination topic dstTopic's
	// read-only ACL, and EnforcesACLs says whether the destination has an
	// authorizer that would enforce it.
	ReadOnlyACL(ctx context.Context, dstTopic string, on bool) error
	EnforcesACLs(ctx context.Context) bool

	// AwaitSettled returns once every copy of the partition's earlier
	// sessions has landed, failed or been written off; waiting, when set,
	// is told once that the wait began.
	AwaitSettled(ctx context.Context, k lease.Key, waiting func(copies int64, since time.Time)) error
	// KeepUnsettled hands over the copies of an ended session still in
	// flight to destination topic dstTopic, up to destination offset end.
	KeepUnsettled(k lease.Key, dstTopic string, acks *batchproduce.Acks, end int64)
	// AddSession makes a running session known to the destination watch,
	// which may interrupt it, until remove.
	AddSession(k lease.Key, s *Session) (remove func())
	// TakeLoss returns, and forgets, what the destination watch found the
	// destination to have lost of the partition.
	TakeLoss(k lease.Key) (Loss, bool)
	// WriteOff fails every copy in flight to destination topic dstTopic
	// and interrupts the sessions that write it, saying why (unless why is
	// empty).
	WriteOff(dstTopic, why string)

	// Fetch registers a partition with its mirror's shared read_committed
	// fetcher, from source offset from on: deliver is called with each
	// fetched batch, in the fetch goroutine, until the Fetch is stopped.
	Fetch(mirror string, conn kafkaconn.Config, topic string, partition int32, from int64, deliver func(FetchBatch)) (Fetch, error)
	// ProduceBatch hands a whole batch for destination topic dstTopic to
	// the instance's batch producer.
	ProduceBatch(ctx context.Context, dstTopic string, partition int32, b batchproduce.Payload, promise func(batchproduce.Result))
	// ProducerTrouble is the producer's current run of errors, its
	// client's or the destination partition's own, once it has lasted
	// long enough to report (zero and nil otherwise).
	ProducerTrouble(dstTopic string, partition int32) (since time.Time, err error)
	// RefreshProducerMetadata makes the producer reload its metadata.
	RefreshProducerMetadata()
	// Recompression returns the codec the mirror's batches are stored
	// with (mirror.compression.type), when it is not each batch's own,
	// from the engine's cache (refreshed with the desired states).
	Recompression(mirror string) (recordbatch.Codec, bool)
	// Throttle waits until the mirror's replication throttle lets size()
	// more bytes of partition k through (the partitions share it evenly),
	// or ctx ends or done is closed; it returns how
	// long it waited. Without a limit it returns at once, and size is not
	// called.
	Throttle(ctx context.Context, done <-chan struct{}, k lease.Key, size func() int64) (time.Duration, error)
	// HealthChanged returns a channel closed when what the clients' health
	// would put in the partitions' rows next changes.
	HealthChanged() <-chan struct{}
}

// Checkpoints is the instance's checkpointer, which saves every partition's
// verified progress in one fenced statement about once a second.
type Checkpoints interface {
	// Update records a partition's latest progress and the offset-map runs
	// that changed since its last update.
	Update(k lease.Key, cp repo.Checkpoint)
	// Save saves a partition's pending progress now, before a state change
	// that must not run ahead of it.
	Save(ctx context.Context, k lease.Key) error
	// Drop forgets a partition's pending progress: a lost lease's leftovers
	// must not be saved later.
	Drop(k lease.Key)
	// CaughtUp asks for the pending progress to be saved soon: a backlog
	// has just been copied.
	CaughtUp()
}

// Fetch is a partition's place in its mirror's fetcher.
type Fetch interface {
	// Trouble is the current run of fetch errors, the partition's own or
	// its mirror's fetch clients', once it has lasted long enough to
	// report (zero and nil otherwise).
	Trouble() (since time.Time, err error)
	// Stop takes the partition out: once it returns, deliver is called no
	// more. The caller must not hold anything deliver waits for.
	Stop()
}

// FetchBatch is what one fetch response held for one partition: its
// record batches as the broker sent them.
type FetchBatch struct {
	Batches []recordbatch.Batch
	// Aborted are the aborted transactions the response listed.
	Aborted []recordbatch.Aborted
	Err     error
	// LSO is the source's last stable offset (read_committed end), -1
	// unknown.
	LSO int64
}

// size is what the batch counts against the mirror's throttle, as the
// mirrored-bytes metric counts it: the batches as fetched.
func (b FetchBatch) size() int64 {
	n := 0
	for i := range b.Batches {
		n += len(b.Batches[i].Raw)
	}
	return int64(n)
}

// Desire is a mirror topic's desired state.
type Desire struct {
	// DestTopic is the topic's name on the destination: the mirror's
	// topic.name.prefix and the source name. It never changes for a topic
	// row. The partition's identity (lease key, row, checkpoint, metrics)
	// stays the source name; only what is asked of the destination
	// cluster uses this one.
	DestTopic         string
	State             service.DesiredState
	ReplicationFactor int
	Recreate          bool
	// ContinueHistory: a destination holding the source's history is
	// proven and continued (continue.go).
	ContinueHistory bool
	// KeepDivergent: with ContinueHistory, a divergent tail is kept and
	// mirroring goes on after it.
	KeepDivergent bool
}

// Source is a mirror's source connection and clients.
type Source struct {
	Conn   kafkaconn.Config
	Client *kgo.Client // for requests that must not be answered from kgo's metadata cache
	Admin  *kadm.Client
}

// SourceTopic is what a raw metadata request says of a source topic.
type SourceTopic struct {
	Exists bool
	ID     [16]byte
}

// DestinationTopic is what making sure of a destination topic found.
type DestinationTopic struct {
	// Created: the engine has just created it, so it is empty.
	Created bool
	// Partitions is how many it has; -1 when someone else created it
	// between the engine's look and its create.
	Partitions int
}

// Interruption ends a mirroring session for something the engine found
// outside it; the worker re-aligns in place instead of failing.
type Interruption struct {
	// Msg says why, for the row's error; Cause, when set, is the shorter
	// reason the realignment's event gives (Msg otherwise).
	Msg, Cause string
	// Lost: the destination lost records this partition had copied, so
	// the row's error says so until the partition is re-aligned.
	Lost bool
}

// Loss is what the destination watch found the destination to have lost of
// a partition: why, and the destination's end offset as it found it.
type Loss struct {
	Msg            string
	DestinationEnd int64
}
