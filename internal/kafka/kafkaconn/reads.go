package kafkaconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionOffsets are a partition's log start and end. For a source, end is
// the last stable offset (what read_committed can see).
type PartitionOffsets struct {
	Start, End int64
}

// ReadOffsets lists one partition's start and end offsets. A missing topic
// or partition is ErrTopicMissing.
func ReadOffsets(ctx context.Context, adm *kadm.Client, topic string, partition int32, committed bool) (PartitionOffsets, error) {
	offs, err := ReadTopicOffsets(ctx, adm, topic, committed)
	if err != nil {
		return PartitionOffsets{}, err
	}
	return offs.Partition(partition)
}

// TopicOffsets are the start and end offsets of every partition of a
// topic, from one pair of requests: what ReadOffsets reads anyway, so
// partitions of one topic can share it.
type TopicOffsets struct {
	topic        string
	starts, ends kadm.ListedOffsets
}

// ReadTopicOffsets lists a topic's start and end offsets (for a source,
// committed ends: the last stable offsets).
func ReadTopicOffsets(ctx context.Context, adm *kadm.Client, topic string, committed bool) (TopicOffsets, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return TopicOffsets{}, err
	}
	var ends kadm.ListedOffsets
	if committed {
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return TopicOffsets{}, err
	}
	return TopicOffsets{topic: topic, starts: starts, ends: ends}, nil
}

// Partition returns one partition's offsets; a missing topic or partition
// is ErrTopicMissing.
func (o TopicOffsets) Partition(partition int32) (PartitionOffsets, error) {
	s, okS := o.starts.Lookup(o.topic, partition)
	e, okE := o.ends.Lookup(o.topic, partition)
	if !okS || !okE {
		return PartitionOffsets{}, ErrTopicMissing
	}
	for _, err := range []error{s.Err, e.Err} {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return PartitionOffsets{}, ErrTopicMissing
		} else if err != nil {
			return PartitionOffsets{}, err
		}
	}
	return PartitionOffsets{Start: s.Offset, End: e.Offset}, nil
}

var ErrTopicMissing = errors.New("topic or partition does not exist")

// ReadRecords reads up to n records of one partition from offset, stopping
// at end (exclusive). readCommitted skips aborted transactional records.
func ReadRecords(ctx context.Context, conn Config, topic string, partition int32, from, end int64, n int, readCommitted bool, extra ...kgo.Opt) ([]*kgo.Record, error) {
	if n <= 0 || from >= end {
		return nil, nil
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, extra...)
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := conn.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		// The records below end already exist, so a fetch returns at once;
		// a quiet poll means the rest below end is aborted or control data.
		pollCtx, cancel := context.WithTimeout(ctx, readQuietPoll)
		fs := cl.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s/%d from %d: %w", topic, partition, from, err)
		}
		got, done := 0, false
		var ferr error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil && !errors.Is(p.Err, context.DeadlineExceeded) && !errors.Is(p.Err, context.Canceled) {
				ferr = p.Err
			}
			for _, r := range p.Records {
				if r.Offset >= end || len(out) >= n {
					done = true
					return
				}
				out = append(out, r)
				got++
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("reading %s/%d from %d: %w", topic, partition, from, ferr)
		}
		if done || got == 0 || nextOffset(out, from) >= end {
			break
		}
	}
	return out, nil
}

// readQuietPoll is how long ReadRecords waits on a poll that returns nothing.
const readQuietPoll = 2 * time.Second

func nextOffset(rs []*kgo.Record, from int64) int64 {
	if len(rs) == 0 {
		return from
	}
	return rs[len(rs)-1].Offset + 1
}

// SameRecord compares what mirroring preserves: key, value, headers (in
// order) and timestamp.
func SameRecord(a, b *kgo.Record) error {
	switch {
	case !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil):
		return errors.New("keys differ")
	case !bytes.Equal(a.Value, b.Value) || (a.Value == nil) != (b.Value == nil):
		return errors.New("values differ")
	case !a.Timestamp.Equal(b.Timestamp):
		return fmt.Errorf("timestamps differ (%s vs %s)", a.Timestamp.UTC().Format(time.RFC3339Nano), b.Timestamp.UTC().Format(time.RFC3339Nano))
	case len(a.Headers) != len(b.Headers):
		return errors.New("header counts differ")
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return fmt.Errorf("header %d differs", i)
		}
	}
	return nil
}
