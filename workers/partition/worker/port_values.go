package worker

import (
	"kmirror/internal/kafka/recordbatch"
	"kmirror/service"
)

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

// SourceTopic is what a raw metadata request says of a source topic.
type SourceTopic struct {
	Exists bool
	// ID is the topic's id; zero from a broker without topic ids.
	ID [16]byte
	// Partitions is how many partitions it has.
	Partitions int
}

// TopicSpec is what a destination topic is created with.
type TopicSpec struct {
	Partitions int
	Configs    map[string]*string
}

// DestinationTopic is what making sure of a destination topic found.
type DestinationTopic struct {
	// Created: the engine has just created it, so it is empty.
	Created bool
	// Partitions is how many it has; -1 when someone else created it
	// between the engine's look and its create.
	Partitions int
}

// Interruption ends a mirroring session for something the destination watch found
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
