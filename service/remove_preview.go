package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sync/errgroup"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// TopicFailoverPreview is what one topic's destination would lack if it
// were removed (failed over) now.
type TopicFailoverPreview struct {
	Topic string `json:"topic"`
	// DestinationTopic is the topic a remove makes writable on the
	// destination.
	DestinationTopic string `json:"destination_topic"`
	// Lag is the sum of the partitions' known lags.
	Lag int64 `json:"lag"`
	// Records is the sum of the partitions' Records, with a partition's
	// Lag where its records were not counted: never below what a failover
	// now would leave behind, and without the transaction markers that
	// Lag counts.
	Records    int64                      `json:"records"`
	Partitions []PartitionFailoverPreview `json:"partitions"`
}

// PartitionFailoverPreview is one partition of a TopicFailoverPreview.
type PartitionFailoverPreview struct {
	Partition int32          `json:"partition"`
	State     PartitionState `json:"state"`
	// NextOffset is the next source offset to mirror, as describe takes it
	// (0 before the first checkpoint).
	NextOffset int64 `json:"next_offset"`
	// SourceEndOffset is the source's last stable offset, read for this
	// call; nil when the source no longer has the partition.
	SourceEndOffset *int64 `json:"source_end_offset"`
	// Lag is SourceEndOffset − NextOffset (at least 0), in source offsets;
	// nil when the end is unknown.
	Lag *int64 `json:"lag"`
	// Records is how many data records [NextOffset, SourceEndOffset)
	// holds, the records a failover now would leave behind: committed
	// ones, transaction markers and aborted records excluded. Nil when
	// Lag is nil or too long to read whole (kafkaconn.ReadCommittedTail);
	// Lag then bounds it.
	Records *int64 `json:"records"`
	// NewestNotCopied is the timestamp of the source's last committed
	// record when Lag > 0; nil when nothing committed is missing.
	NewestNotCopied *time.Time `json:"newest_not_copied"`
	// OldestNotCopied is the timestamp of the first committed record at or
	// after NextOffset when Lag > 0: the oldest data a failover now would
	// lose. OldestNotCopiedAgeMs is its age when the preview was made. Nil
	// when nothing committed is missing (or the first 520 offsets hold no
	// committed record: a long aborted transaction).
	OldestNotCopied      *time.Time `json:"oldest_not_copied"`
	OldestNotCopiedAgeMs *int64     `json:"oldest_not_copied_age_ms"`
}

// tailReadParallelism bounds the source reads one preview runs at once.
const tailReadParallelism = 8

// PreviewRemoveTopics answers what a remove of the topics matching pattern
// would leave behind, per partition: the lag against the source's end read
// now, the data records in it, and the newest source timestamp not copied
// yet. The pattern resolves
// as RemoveTopics resolves it, with the same errors; nothing is written.
// The source is asked once per call for every topic's ends and once per
// lagging partition for its last record, each bounded by the source
// timeout; a source that does not answer is an *UnavailableError.
func (s *Control) PreviewRemoveTopics(ctx context.Context, mirror, pattern string) (TopicsResult, error) {
	re, err := compileTopicPattern(pattern)
	if err != nil {
		return TopicsResult{}, err
	}
	m, err := s.mirror(ctx, mirror)
	if err != nil {
		return TopicsResult{}, err
	}
	existing, err := topicsByName(ctx, s.pool, mirror)
	if err != nil {
		return TopicsResult{}, err
	}
	names, err := resolveTransition(existing, re, mirror, pattern, removeTransition)
	if err != nil {
		return TopicsResult{}, err
	}
	parts, err := repo.PartitionsList(ctx, s.pool, repo.PartitionsListParams{Mirror: mirror, Topics: names})
	if err != nil {
		return TopicsResult{}, err
	}
	conn, err := s.sourceConn(m)
	if err != nil {
		return TopicsResult{}, err
	}
	// Fresh ends: the stored ones are as old as the last refresh, and a
	// failover decision wants what the source holds now.
	ends, err := kafkaconn.ListCommittedEnds(ctx, conn, names, s.sourceTimeout)
	if err != nil {
		return TopicsResult{}, sourceUnavailable(conn, err)
	}

	byTopic := make(map[string]*TopicFailoverPreview, len(names))
	out := make([]TopicFailoverPreview, len(names))
	for i, name := range names {
		out[i].Topic, out[i].DestinationTopic = name, existing[name].DestTopic
		out[i].Partitions = []PartitionFailoverPreview{}
		byTopic[name] = &out[i]
	}
	type tailRead struct {
		row      *PartitionFailoverPreview
		topic    string
		from, to int64
	}
	var reads []tailRead
	for _, p := range parts {
		row := PartitionFailoverPreview{Partition: p.Partition, State: p.State}
		if p.SrcNext != nil {
			row.NextOffset = *p.SrcNext
		}
		e, ok := ends.Lookup(p.Topic, p.Partition)
		switch {
		case !ok || errors.Is(e.Err, kerr.UnknownTopicOrPartition):
			// The source no longer has it: nothing there to lose.
		case e.Err != nil:
			return TopicsResult{}, sourceUnavailable(conn, fmt.Errorf("listing the end of %s/%d: %w", p.Topic, p.Partition, e.Err))
		default:
			end, lag := e.Offset, max(e.Offset-row.NextOffset, 0)
			row.SourceEndOffset, row.Lag = &end, &lag
		}
		if row.Lag != nil && *row.Lag == 0 {
			row.Records = new(int64)
		}
		t := byTopic[p.Topic]
		t.Partitions = append(t.Partitions, row)
		if row.Lag != nil {
			t.Lag += *row.Lag
		}
	}
	for i := range out {
		for j := range out[i].Partitions {
			if r := &out[i].Partitions[j]; r.Lag != nil && *r.Lag > 0 {
				reads = append(reads, tailRead{row: r, topic: out[i].Topic, from: r.NextOffset, to: *r.SourceEndOffset})
			}
		}
	}

	// One small read per lagging partition, a few at a time.
	var g errgroup.Group
	g.SetLimit(tailReadParallelism)
	for _, rd := range reads {
		g.Go(func() error {
			tail, err := kafkaconn.ReadCommittedTail(ctx, conn, rd.topic, rd.row.Partition, rd.from, rd.to, s.sourceTimeout)
			if err != nil {
				return fmt.Errorf("reading the last records of %s/%d: %w", rd.topic, rd.row.Partition, err)
			}
			if tail.Last != nil {
				ts := tail.Last.Timestamp.UTC()
				rd.row.NewestNotCopied = &ts
			}
			if tail.First != nil {
				ts := tail.First.Timestamp.UTC()
				age := max(time.Since(ts).Milliseconds(), 0)
				rd.row.OldestNotCopied, rd.row.OldestNotCopiedAgeMs = &ts, &age
			}
			if tail.Counted {
				rd.row.Records = &tail.Records
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return TopicsResult{}, sourceUnavailable(conn, err)
	}
	for i := range out {
		for _, p := range out[i].Partitions {
			switch {
			case p.Records != nil:
				out[i].Records += *p.Records
			case p.Lag != nil:
				out[i].Records += *p.Lag
			}
		}
	}
	return TopicsResult{Mirror: mirror, Action: removeTransition.action, Topics: names, Failover: out}, nil
}

// sourceUnavailable turns a failed source request into an *UnavailableError
// that names the source's bootstrap servers.
func sourceUnavailable(conn kafkaconn.Config, err error) error {
	detail := err.Error()
	var unreachable *kafkaconn.UnreachableError
	if !errors.As(err, &unreachable) {
		detail = fmt.Sprintf("source cluster at %s: %v", strings.Join(conn.BootstrapServers, ","), err)
	}
	return &UnavailableError{Dependency: "source cluster", Detail: detail}
}
