package batchfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/leaders"
)

// TruncatedError says the source leader's log no longer holds what was
// read from it: after an unclean leader election (or a replica that lost
// its disk) the new leader's log ends the epoch of the last batch read
// before the position reached, and what follows there is other records or
// none. What was read from EndOffset on may already be copied; it is not
// the source's any more, so the partition stops here and is never fetched
// past the divergence.
type TruncatedError struct {
	Topic     string
	Partition int32
	// Epoch and EndOffset are the leader's answer: the last epoch its log
	// shares with what was read, and where that epoch ends.
	Epoch     int32
	EndOffset int64
	// LastEpoch and Position are what was read: the epoch of the last
	// batch and the offset after it.
	LastEpoch int32
	Position  int64
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("the source log of %s/%d was truncated: its leader's epoch %d ends at offset %d, "+
		"but offsets up to %d were read in epoch %d (an unclean leader election?); records [%d, %d) read before are no longer the source's",
		e.Topic, e.Partition, e.Epoch, e.EndOffset, e.Position, e.LastEpoch, e.EndOffset, e.Position)
}

// diverged reads a partition's diverging epoch (fetch v12+, KIP-320) as
// Kafka's consumer reads it: a leader whose log ends the epoch asked for
// before the position truncated what was read (an error); one that ends it
// at or past the position only moved on, and the partition is asked for
// again without naming an epoch (again).
func diverged(tp leaders.TopicPartition, r requested, d kmsg.FetchResponseTopicPartitionDivergingEpoch) (err error, again bool) {
	if d.Epoch < 0 || d.EndOffset < 0 {
		return nil, false
	}
	if d.EndOffset < r.offset {
		return &TruncatedError{Topic: tp.Topic, Partition: tp.Partition, Epoch: d.Epoch, EndOffset: d.EndOffset,
			LastEpoch: r.epoch, Position: r.offset}, false
	}
	return nil, true
}
