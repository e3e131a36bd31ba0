package worker

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
)

// Ports are the doors a Worker acts through, one for each kind of thing it
// does. Each is implemented by the part of the instance that owns that
// thing (the engine's desired-state cache, its grouped statements, its
// clients of each cluster, the service's Workers face), never by one object
// that forwards to all of them; tests give a worker in-memory fakes. A
// worker reaches nothing else: no pool, no repo query, no Kafka client.
//
// Errors that are not this package's failures fail the partition
// retryably, with their message.
type Ports struct {
	Desires Desires
	// Prepare bounds how many partitions prepare, or read records back to
	// align, at once; TakeOver, wider, how many load their row and
	// re-align after a new lease (a re-alignment that reads records back
	// takes a Prepare slot too).
	Prepare, TakeOver Slots
	Rows              PartitionRows
	Topics            TopicRows
	OffsetMap         OffsetMap
	Sources           Sources
	Destination       Destination
	Copy              Copy
	Watch             DestinationWatch
	Checkpoints       Checkpoints
	// Pokes cuts a FAILED partition's wait for its next retry short: the
	// destination watch found what failed it, and a realignment repairs it.
	Pokes <-chan struct{}
}

// Desires is the cache of the topics' desired states.
type Desires interface {
	// Desire returns a topic's desired state; ok is false for a topic the
	// cache does not hold.
	Desire(mirror, topic string) (d Desire, ok bool)
	// Changed returns a channel closed at the next change of any desired
	// state.
	Changed() <-chan struct{}
	// Refresh reads every desired state again now.
	Refresh(ctx context.Context) error
}

// Slots bound how many partitions do something at once.
type Slots interface {
	// Acquire waits for a slot; release gives it back (and is safe to call
	// when err is not nil).
	Acquire(ctx context.Context) (release func(), err error)
}

// PartitionRows reads and writes the partition's own row. Row, Transition
// and Realign go in one statement with the other workers' of the moment
// and take no context: each statement has its own timeout.
type PartitionRows interface {
	// Row reads a partition's row.
	Row(id repo.PartitionID) (repo.Partition, error)
	// Transition writes one state change through the service (state
	// machine, fencing, event and outbox).
	Transition(t service.PartitionTransition) (repo.Partition, error)
	// Realign records a realignment: the state kept, a new checkpoint,
	// its event.
	Realign(r service.PartitionRealignment) (repo.Partition, error)
	// RecordPartitionError puts msg in the row while the partition stays in
	// state, and RecordPartitionLoss a destination's loss with the end it
	// found; both fenced by the lease.
	RecordPartitionError(ctx context.Context, f repo.LeaseFence, state service.PartitionState, msg string) error
	RecordPartitionLoss(ctx context.Context, f repo.LeaseFence, state service.PartitionState, msg string, dstEnd int64) error
}

// TopicRows reads and writes what the workers record on their topic's row,
// fenced by the writing partition's lease. A topic's partitions share the
// reads, and a write of the same value by several of them is made once.
type TopicRows interface {
	TopicState(ctx context.Context, mirror, topic string) (repo.TopicWorkerState, error)
	// RecordSourceTopicID records the source topic's id unless one is
	// recorded, and returns the one recorded.
	RecordSourceTopicID(ctx context.Context, f repo.LeaseFence, id []byte) ([]byte, error)
	// AcceptRecreatedSourceTopic replaces the recorded id old with id, once
	// a continue proved the new topic holds the history.
	AcceptRecreatedSourceTopic(ctx context.Context, f repo.LeaseFence, old, id []byte) error
	RecordReadOnlyEnforced(ctx context.Context, f repo.LeaseFence, enforced bool) error
	// RecordDestinationRecreated forgets every partition's checkpoint and
	// offset map and clears the recreate request.
	RecordDestinationRecreated(ctx context.Context, f repo.LeaseFence) error
	// KeepDivergentTail records the divergent tail a continue keeps (nil:
	// none).
	KeepDivergentTail(ctx context.Context, f repo.LeaseFence, t *service.DivergentTail) error
	// CountStillMirrored counts the topic's other partitions that are not
	// yet STOPPED.
	CountStillMirrored(ctx context.Context, f repo.LeaseFence) (int, error)
}

// OffsetMap is the partition's map of source offsets to destination
// offsets, in runs. Reads return repo.ErrNotFound for no run.
type OffsetMap interface {
	// FirstRun is the partition's first run: where mirroring began.
	FirstRun(ctx context.Context, id repo.PartitionID) (repo.OffsetRun, error)
	// RunAt is the run that holds destination offset dst.
	RunAt(ctx context.Context, id repo.PartitionID, dst int64) (repo.OffsetRun, error)
	// TruncateRuns cuts the map back to the destination offsets below
	// dstEnd, and DeleteRuns empties it.
	TruncateRuns(ctx context.Context, f repo.LeaseFence, dstEnd int64) error
	DeleteRuns(ctx context.Context, f repo.LeaseFence) error
}

// Sources gives each mirror's source cluster.
type Sources interface {
	// Source returns the mirror's source cluster, from its row read afresh
	// (shared with the partitions that ask at the same time).
	Source(ctx context.Context, mirror string) (Source, error)
}

// Source is one mirror's source cluster, as its partitions read it.
type Source interface {
	// Offsets returns a partition's start and end offsets, from a listing of
	// its whole topic shared with its other partitions; committed ends are
	// the last stable offsets.
	Offsets(ctx context.Context, topic string, partition int32, committed bool) (kafkaconn.PartitionOffsets, error)
	// Topic asks the source what it holds of a topic, bypassing the
	// clients' metadata caches.
	Topic(ctx context.Context, topic string) (SourceTopic, error)
	// Records reads up to n committed records of a partition in [from,
	// end).
	Records(ctx context.Context, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error)
	// MirrorState returns the source cluster's decoded __mirror_state (a
	// failback's proof).
	MirrorState(ctx context.Context) (service.StateSnapshot, error)
	// Spec is what a destination topic mirroring source topic topic is
	// created with: its partition count, and its dynamic configs as the
	// metadata sync would set them (nil when they cannot be read: the
	// broker's defaults, until the next sync).
	Spec(ctx context.Context, topic string) (TopicSpec, error)
	// ProveContinuation runs service.ProveContinuation for in, with the
	// clusters' connections filled in.
	ProveContinuation(ctx context.Context, in service.ContinuationInput) (service.PartitionContinuation, error)
	// Fetch registers a partition with the mirror's shared read_committed
	// fetcher, from source offset from on: deliver is called with each
	// fetched batch, in the fetch goroutine, until the Fetch is stopped.
	Fetch(topic string, partition int32, from int64, deliver func(FetchBatch)) (Fetch, error)
}

// Destination is the destination cluster, as a partition's alignment and
// topic set-up use it. Topics are named as on the destination
// (Desire.DestTopic).
type Destination interface {
	// Offsets returns a partition's start and end offsets, from a listing
	// of its whole topic shared with its other partitions.
	Offsets(ctx context.Context, topic string, partition int32) (kafkaconn.PartitionOffsets, error)
	// Records reads up to n records of a partition in [from, end).
	Records(ctx context.Context, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error)
	// EnsureTopic creates topic, as spec says, when it is missing (spec is
	// asked only then); the topic's partitions that ask while it runs share
	// its outcome.
	EnsureTopic(ctx context.Context, topic string, replicationFactor int16, spec func(context.Context) (TopicSpec, error)) (DestinationTopic, error)
	// RecreateTopic drops a topic, creates it again once the deletion is
	// done, and writes off the producer's copies to the old one.
	RecreateTopic(ctx context.Context, topic string, partitions int32, replicationFactor int16) error
	// ReadOnlyACL adds (on) or deletes a topic's read-only ACL, and
	// EnforcesACLs says whether the destination has an authorizer that
	// would enforce it.
	ReadOnlyACL(ctx context.Context, topic string, on bool) error
	EnforcesACLs(ctx context.Context) bool
}

// Copy is the instance's batch producer to the destination and what paces
// the mirrors' copies.
type Copy interface {
	// Produce hands a whole batch for a destination partition to the
	// producer; promise is called with its result, in produce order.
	Produce(ctx context.Context, topic string, partition int32, b batchproduce.Payload, promise func(batchproduce.Result))
	// ProducerTrouble is the producer's current run of errors, its
	// client's or the destination partition's own, once it has lasted
	// long enough to report (zero and nil otherwise).
	ProducerTrouble(topic string, partition int32) (since time.Time, err error)
	// RefreshProducerMetadata makes the producer reload its metadata.
	RefreshProducerMetadata()
	// Recompression returns the codec the mirror's batches are stored with
	// (mirror.compression.type), when it is not each batch's own.
	Recompression(mirror string) (recordbatch.Codec, bool)
	// Throttle waits until the mirror's replication throttle lets size()
	// more bytes of partition k through (the partitions share it evenly),
	// or ctx ends or done is closed; it returns how long it waited.
	// Without a limit it returns at once, and size is not called.
	Throttle(ctx context.Context, done <-chan struct{}, k lease.Key, size func() int64) (time.Duration, error)
	// HealthChanged returns a channel closed when what the clients' health
	// would put in the partitions' rows next changes.
	HealthChanged() <-chan struct{}
}

// DestinationWatch follows the copies in flight to the destination and what
// the destination lost of them.
type DestinationWatch interface {
	// AwaitSettled returns once every copy of the partition's earlier
	// sessions has landed, failed or been written off; waiting, when set,
	// is told once that the wait began.
	AwaitSettled(ctx context.Context, k lease.Key, waiting func(copies int64, since time.Time)) error
	// KeepUnsettled hands over the copies of an ended session still in
	// flight to topic, up to destination offset end.
	KeepUnsettled(k lease.Key, topic string, acks *batchproduce.Acks, end int64)
	// Watch makes a running session's copies to topic known to the watch
	// until remove. The watch sends on interrupted (buffered) when it ends
	// the session from outside: the destination lost what it copied, or
	// its copies were written off.
	Watch(k lease.Key, topic string, acks *batchproduce.Acks) (interrupted <-chan Interruption, remove func())
	// TakeLoss returns, and forgets, what the watch found the destination
	// to have lost of the partition.
	TakeLoss(k lease.Key) (Loss, bool)
	// WriteOff fails every copy in flight to topic and interrupts the
	// sessions that write it, saying why (unless why is empty).
	WriteOff(topic, why string)
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
