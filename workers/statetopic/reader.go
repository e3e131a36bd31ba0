package statetopic

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/service"
)

// ReadState reads __mirror_state from its start to its current end and
// returns the last value of every key; tombstoned keys are left out.
func ReadState(ctx context.Context, dest kafkaconn.Config) (map[string][]byte, error) {
	adm, err := dest.NewAdmin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ends, err := adm.ListEndOffsets(ctx, service.StateTopic)
	if err != nil {
		return nil, fmt.Errorf("list %s end offsets: %w", service.StateTopic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, service.StateTopic)
	if err != nil {
		return nil, fmt.Errorf("list %s start offsets: %w", service.StateTopic, err)
	}
	want := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	var missing error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			missing = o.Err
			return
		}
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Offset < o.Offset {
			want[o.Partition] = o.Offset
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
		}
	})
	if errors.Is(missing, kerr.UnknownTopicOrPartition) || (missing == nil && len(ends) == 0) {
		return nil, fmt.Errorf("%w on the destination", service.ErrStateTopicMissing)
	} else if missing != nil {
		return nil, fmt.Errorf("list %s offsets: %w", service.StateTopic, missing)
	}
	latest := map[string][]byte{}
	if len(want) == 0 {
		return latest, nil
	}
	cl, err := dest.NewClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{service.StateTopic: from}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", service.StateTopic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("read %s: %w", service.StateTopic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Value == nil {
				delete(latest, string(r.Key))
			} else {
				latest[string(r.Key)] = r.Value
			}
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return latest, nil
}

// DestinationEnds lists the destination's end offsets of the topics that
// snap has partition records of, by destination topic name (a mirror's
// topic.name.prefix and the source name), for kmirror restore --verify.
func DestinationEnds(ctx context.Context, dest kafkaconn.Config, snap service.StateSnapshot) (map[string]map[int32]int64, error) {
	names := snap.DestinationTopics()
	seen := map[string]bool{}
	var topics []string
	for _, p := range snap.Partitions {
		if d := names[[2]string{p.Mirror, p.Topic}]; !seen[d] {
			seen[d] = true
			topics = append(topics, d)
		}
	}
	out := map[string]map[int32]int64{}
	if len(topics) == 0 {
		return out, nil
	}
	adm, err := dest.NewAdmin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list destination end offsets: %w", err)
	}
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return // reported per partition as missing
		}
		if o.Err != nil {
			ferr = fmt.Errorf("list destination end offsets of %s/%d: %w", o.Topic, o.Partition, o.Err)
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, ferr
}
