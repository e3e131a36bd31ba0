package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"kmirror/repo"
)

// PartitionRow is one describe row (DESIGN.md section 6).
type PartitionRow struct {
	Mirror            string
	Topic             string
	Partition         int32
	SourceOffset      *int64
	DestinationOffset *int64
	Lag               *int64
	State             PartitionState
	Error             string
	RetryAttempt      int
	LostRecords       int64
	Owner             string
	// ReadOnlyEnforced: nil unknown, else whether a DENY WRITE ACL keeps the
	// destination topic read-only.
	ReadOnlyEnforced *bool
	// LeaseLive: an instance's live session holds the partition's lease.
	// False for a partition nobody owns or whose owner stopped renewing:
	// its state is then what the last owner left, not what is happening.
	LeaseLive bool
	// OwnerRenewedAt is when the owner last renewed its session.
	OwnerRenewedAt *time.Time
	// ProgressedAt is when the checkpoint last moved forward.
	ProgressedAt *time.Time
}

// PartitionFilter selects describe rows; empty fields match all.
type PartitionFilter struct {
	Mirror string
	// Topic is an RE2 pattern matched against whole topic names.
	Topic string
	// State is a state name, UNKNOWN included.
	State string
}

// ListPartitions returns the describe rows.
func (s *Service) ListPartitions(ctx context.Context, f PartitionFilter) ([]PartitionRow, error) {
	var v validation
	if f.Mirror != "" && !validName(f.Mirror) {
		validateMirrorName(&v, f.Mirror)
	}
	state := strings.ToUpper(f.State)
	if state != "" && state != "UNKNOWN" && !PartitionState(state).Valid() {
		v.addf("state", "%q is not a partition state (UNKNOWN, %s)", f.State, joinStates())
	}
	if f.Topic != "" {
		if _, err := CompilePattern(f.Topic); err != nil {
			v.addf("topic", "%s", err)
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if f.Mirror != "" {
		if _, err := s.mirror(ctx, f.Mirror); err != nil {
			return nil, err
		}
	}
	readOnly, err := repo.TopicsReadOnly(ctx, s.pool, f.Mirror)
	if err != nil {
		return nil, err
	}
	params := repo.PartitionsListParams{Mirror: f.Mirror, State: state}
	if re, _ := CompilePattern(f.Topic); re != nil {
		// The pattern (RE2) is matched against the topic names here, and
		// only the matching topics' rows are read: at thousands of
		// partitions, loading every row to drop most of them was slow.
		params.Topics = []string{}
		seen := map[string]bool{}
		for k := range readOnly {
			if t := k[1]; !seen[t] && re.MatchString(t) {
				seen[t] = true
				params.Topics = append(params.Topics, t)
			}
		}
	}
	parts, err := repo.PartitionsList(ctx, s.pool, params)
	if err != nil {
		return nil, err
	}
	out := make([]PartitionRow, 0, len(parts))
	for _, p := range parts {
		row := describeRow(p)
		row.ReadOnlyEnforced = readOnly[[2]string{p.Mirror, p.Topic}]
		out = append(out, row)
	}
	return out, nil
}

func joinStates() string {
	names := make([]string, len(AllStates))
	for i, s := range AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// describeRow derives lag: source end offset − src_next, in source offsets.
func describeRow(p repo.Partition) PartitionRow {
	r := PartitionRow{
		Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition,
		SourceOffset: p.SourceEndOffset, DestinationOffset: p.DestinationEndOffset,
		State: p.State, Error: p.Error, RetryAttempt: p.RetryAttempt,
		LostRecords: p.LostRecords, Owner: p.LeaseOwner,
		LeaseLive: p.LeaseLive, OwnerRenewedAt: p.OwnerRenewedAt, ProgressedAt: p.ProgressedAt,
	}
	if p.SourceEndOffset != nil {
		next := int64(0)
		if p.SrcNext != nil {
			next = *p.SrcNext
		}
		lag := max(*p.SourceEndOffset-next, 0)
		r.Lag = &lag
	}
	return r
}

// TopicPartitions returns the describe rows of one mirror topic.
func (s *Service) TopicPartitions(ctx context.Context, mirror, topic string) ([]PartitionRow, error) {
	if _, err := s.GetTopic(ctx, mirror, topic); err != nil {
		return nil, err
	}
	parts, err := repo.PartitionsList(ctx, s.pool, repo.PartitionsListParams{Mirror: mirror, Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	t, err := repo.TopicsGet(ctx, s.pool, mirror, topic)
	if err != nil {
		return nil, err
	}
	out := make([]PartitionRow, len(parts))
	for i, p := range parts {
		out[i] = describeRow(p)
		out[i].ReadOnlyEnforced = t.ReadOnlyEnforced
	}
	return out, nil
}

// Translate maps a source offset of a mirror partition to the destination.
func (s *Service) Translate(ctx context.Context, mirror, topic string, partition int32, sourceOffset int64) (Translation, error) {
	if sourceOffset < 0 {
		return Translation{}, &ValidationError{Fields: []FieldError{{Field: "source_offset", Message: "must be >= 0"}}}
	}
	if _, err := s.GetTopic(ctx, mirror, topic); err != nil {
		return Translation{}, err
	}
	if _, err := repo.PartitionsGet(ctx, s.pool, mirror, topic, partition); errors.Is(err, repo.ErrNotFound) {
		return Translation{}, &NotFoundError{Kind: "partition", Detail: fmt.Sprintf(
			"topic %s of mirror %s has no partition %d", topic, mirror, partition)}
	} else if err != nil {
		return Translation{}, err
	}
	before, after, err := repo.OffsetRunsAround(ctx, s.pool, mirror, topic, partition, sourceOffset)
	if err != nil {
		return Translation{}, err
	}
	t, ok := translateOffset(sourceOffset, before, after)
	if !ok {
		return Translation{}, &NotFoundError{Kind: "offset", Detail: fmt.Sprintf(
			"nothing of %s/%d has been mirrored yet, so no offset can be translated", topic, partition)}
	}
	return t, nil
}
