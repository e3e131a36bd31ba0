package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"kmirror/repo"
)

// Event kinds of partitions.
const (
	// EventPartitionState is every partition state change.
	EventPartitionState = "partition.state"
	// EventPartitionOwner is a new owner taking over a partition in flight
	// and re-aligning it, with no state change.
	EventPartitionOwner = "partition.owner"
	// EventPartitionRealigned is a MIRRORING partition re-aligning in place
	// (records removed by retention before they were mirrored are counted).
	EventPartitionRealigned = "partition.realigned"
)

// ErrLeaseLost is a fenced write that found another owner, epoch or state:
// the caller must stop acting on the partition.
var ErrLeaseLost = errors.New("partition lease lost or state changed underneath")

// PartitionTransition is one state change by a partition's lease holder.
type PartitionTransition struct {
	Mirror    string
	Topic     string
	Partition int32
	Owner     string
	Epoch     int64
	From, To  PartitionState
	// Error is the FAILED cause; Retryable says whether backoff retries it.
	Error        string
	Retryable    bool
	RetryAttempt int
	NextRetryAt  *time.Time
	// SrcNext and DstNext, when both set, replace the checkpoint.
	SrcNext, DstNext *int64
	// SourceEnd and DestinationEnd, each when set, replace the end offsets
	// describe shows: the ends an alignment found its checkpoint against,
	// so that describe right after the change (a topic action's ?wait has
	// just seen it) pairs the new checkpoint with them, not with ends from
	// before it or none.
	SourceEnd, DestinationEnd *int64
	LostRecordsAdd            int64
	// Reason is added to the event message.
	Reason string
}

// PartitionEventData is the data of the partition events, stored with the
// event (events.data) and sent as its data on /v1/events: partition.state
// has From, To, Reason (the message's cause, when there is one), Error (the
// FAILED cause), Epoch and Owner; partition.owner and partition.realigned
// have State, Epoch, Owner and Cause, and partition.owner PreviousOwner.
// States are named as PartitionState.String does (UNKNOWN for none). A
// change to STOPPED also has LastMirrored, null when nothing was copied
// (the repo adds it from the stored row).
type PartitionEventData struct {
	Mirror        string        `json:"mirror"`
	Topic         string        `json:"topic"`
	Partition     int32         `json:"partition"`
	From          string        `json:"from,omitempty"`
	To            string        `json:"to,omitempty"`
	State         string        `json:"state,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	Error         string        `json:"error,omitempty"`
	Cause         string        `json:"cause,omitempty"`
	Epoch         int64         `json:"epoch"`
	Owner         string        `json:"owner"`
	PreviousOwner string        `json:"previous_owner,omitempty"`
	LastMirrored  *LastMirrored `json:"last_mirrored,omitempty"`
}

// LastMirrored are the source and destination offsets of the last record a
// partition copied: the end of its offset map. The checkpoint's src_next
// may lie past transaction markers, which are never copied, so src_next−1
// need not be a copied record.
type LastMirrored struct {
	SourceOffset      int64 `json:"source_offset"`
	DestinationOffset int64 `json:"destination_offset"`
}

// LastMirroredOf is a row's last mirrored offsets, nil before any.
func LastMirroredOf(p repo.Partition) *LastMirrored {
	if p.LastMirroredSrc == nil || p.LastMirroredDst == nil {
		return nil
	}
	return &LastMirrored{SourceOffset: *p.LastMirroredSrc, DestinationOffset: *p.LastMirroredDst}
}

func (d PartitionEventData) raw() json.RawMessage {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // strings and integers only
	}
	return b
}

// PartitionRecord is a partition's state as published to __mirror_state.
type PartitionRecord struct {
	Version       int            `json:"version"`
	Mirror        string         `json:"mirror"`
	Topic         string         `json:"topic"`
	Partition     int32          `json:"partition"`
	State         PartitionState `json:"state"`
	PreviousState PartitionState `json:"previous_state,omitempty"`
	Error         string         `json:"error,omitempty"`
	SrcNext       *int64         `json:"src_next,omitempty"`
	DstNext       *int64         `json:"dst_next,omitempty"`
	LostRecords   int64          `json:"lost_records"`
	// LastMirroredSrc and LastMirroredDst are the last mirrored offsets
	// (LastMirrored), both absent before any record was copied and in
	// records written before kmirror kept them: an added optional field,
	// so the version stays and older readers skip it.
	LastMirroredSrc *int64    `json:"last_mirrored_src,omitempty"`
	LastMirroredDst *int64    `json:"last_mirrored_dst,omitempty"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// PartitionRecordOf builds the __mirror_state record of a partition row.
func PartitionRecordOf(p repo.Partition) PartitionRecord {
	return PartitionRecord{Version: RecordVersion, Mirror: p.Mirror, Topic: p.Topic,
		Partition: p.Partition, State: p.State, PreviousState: p.PreviousState, Error: p.Error,
		SrcNext: p.SrcNext, DstNext: p.DstNext, LostRecords: p.LostRecords,
		LastMirroredSrc: p.LastMirroredSrc, LastMirroredDst: p.LastMirroredDst, UpdatedAt: p.UpdatedAt}
}

// TransitionPartition validates a state change with the state machine and
// writes it, fenced by owner and epoch, with its event and outbox rows in one
// transaction. An invalid step is an *InvalidTransitionError and writes
// nothing; a lost lease is ErrLeaseLost.
func (s *Workers) TransitionPartition(ctx context.Context, t PartitionTransition) (repo.Partition, error) {
	rows, errs := s.TransitionPartitions(ctx, []PartitionTransition{t})
	return rows[0], errs[0]
}

// TransitionPartitions is TransitionPartition for many partitions, in one
// statement: results and errors are aligned with ts, and each change stands
// or falls alone (an invalid step or a lost lease writes nothing for that
// partition only). An error of the statement itself is every one's.
func (s *Workers) TransitionPartitions(ctx context.Context, ts []PartitionTransition) ([]repo.Partition, []error) {
	rows, errs := make([]repo.Partition, len(ts)), make([]error, len(ts))
	var writes []repo.PartitionStateWrite
	var at []int // index in ts of each write
	for i, t := range ts {
		if err := CheckTransition(t.From, t.To); err != nil {
			errs[i] = err
			continue
		}
		writes = append(writes, partitionStateWrite(t))
		at = append(at, i)
	}
	if len(writes) == 0 {
		return rows, errs
	}
	stored, err := repo.PartitionsTransitions(ctx, s.pool, writes, RecordVersion)
	for j, i := range at {
		rows[i], errs[i] = storedWrite(stored, err, j)
	}
	return rows, errs
}

// storedWrite is the outcome of write j of a repo.PartitionsTransitions
// statement: the statement's error, ErrLeaseLost when its fence held
// nothing, or the stored row.
func storedWrite(stored []repo.Partition, err error, j int) (repo.Partition, error) {
	switch {
	case err != nil:
		return repo.Partition{}, err
	case stored[j].Mirror == "":
		return repo.Partition{}, ErrLeaseLost
	}
	return stored[j], nil
}

// partitionStateWrite is a valid state change as the repo writes it: the
// row's new state, its event and its outbox key (the outbox value is built
// from the stored row, repo.PartitionsTransitions).
func partitionStateWrite(t PartitionTransition) repo.PartitionStateWrite {
	msg := fmt.Sprintf("%s/%d: %s → %s", t.Topic, t.Partition, t.From, t.To)
	if t.Reason != "" {
		msg += ": " + t.Reason
	} else if t.Error != "" {
		msg += ": " + t.Error
	}
	data := PartitionEventData{Mirror: t.Mirror, Topic: t.Topic, Partition: t.Partition,
		From: t.From.String(), To: t.To.String(), Reason: cmp.Or(t.Reason, t.Error),
		Epoch: t.Epoch, Owner: t.Owner}
	if t.To == StateFailed {
		data.Error = t.Error // a retry's row keeps it too; its event does not repeat it
	}
	return repo.PartitionStateWrite{
		PartitionsSetStateParams: repo.PartitionsSetStateParams{
			Mirror: t.Mirror, Topic: t.Topic, Partition: t.Partition, Owner: t.Owner, Epoch: t.Epoch,
			From: t.From, To: t.To, Error: t.Error, Retryable: t.Retryable,
			RetryAttempt: t.RetryAttempt, NextRetryAt: t.NextRetryAt, SrcNext: t.SrcNext,
			DstNext: t.DstNext, SourceEnd: t.SourceEnd, DestinationEnd: t.DestinationEnd,
			LostRecordsAdd: t.LostRecordsAdd},
		Event:     repo.Event{Kind: EventPartitionState, Message: msg, Data: data.raw()},
		OutboxKey: PartitionKey(t.Mirror, t.Topic, t.Partition),
		// Where a failover left the destination, and where a failback
		// continues: in the event, as well as on the row.
		EventLastMirrored: t.To == StateStopped,
	}
}

// PartitionRealignment is an alignment of a partition without a state
// change: by a new owner taking over a partition that its previous owner
// left in flight (after a crash, a hand-back or a rebalance), or in place
// while MIRRORING (the source dropped the next records). The state is kept.
type PartitionRealignment struct {
	Mirror    string
	Topic     string
	Partition int32
	Owner     string
	Epoch     int64
	// Takeover says a new owner took the partition over from Previous ("" if
	// unknown); otherwise Cause says why it re-aligned in place.
	Takeover bool
	Previous string
	Cause    string
	State    PartitionState
	// SrcNext and DstNext are where alignment says mirroring resumes; the
	// destination ends at DstNext, as describe then shows.
	SrcNext, DstNext int64
	// SourceEnd, when set, is the source's end that alignment listed.
	SourceEnd      *int64
	LostRecordsAdd int64
	// Summary says how alignment found the resume point.
	Summary string
}

// RecordRealignment stores a re-aligned checkpoint and any records lost to
// retention, fenced by owner, epoch and state, with an event and the outbox
// row, in one statement. A lost lease or a changed state is ErrLeaseLost.
func (s *Workers) RecordRealignment(ctx context.Context, t PartitionRealignment) (repo.Partition, error) {
	rows, errs := s.RecordRealignments(ctx, []PartitionRealignment{t})
	return rows[0], errs[0]
}

// RecordRealignments is RecordRealignment for many partitions, in one
// statement, as TransitionPartitions writes state changes: a new owner
// takes over thousands of partitions at once after a hand-back, and one
// commit each would queue them behind each other.
func (s *Workers) RecordRealignments(ctx context.Context, ts []PartitionRealignment) ([]repo.Partition, []error) {
	writes := make([]repo.PartitionStateWrite, len(ts))
	for i, t := range ts {
		writes[i] = realignmentWrite(t)
	}
	rows, errs := make([]repo.Partition, len(ts)), make([]error, len(ts))
	stored, err := repo.PartitionsTransitions(ctx, s.pool, writes, RecordVersion)
	for i := range ts {
		rows[i], errs[i] = storedWrite(stored, err, i)
	}
	return rows, errs
}

// realignmentWrite is a realignment as the repo writes it: the state kept,
// the new checkpoint, and its event.
func realignmentWrite(t PartitionRealignment) repo.PartitionStateWrite {
	kind, msg := EventPartitionRealigned, fmt.Sprintf("%s/%d: re-aligned while %s (%s): %s",
		t.Topic, t.Partition, t.State, t.Cause, t.Summary)
	data := PartitionEventData{Mirror: t.Mirror, Topic: t.Topic, Partition: t.Partition,
		State: t.State.String(), Cause: t.Cause, Epoch: t.Epoch, Owner: t.Owner}
	if t.Takeover {
		kind, msg = EventPartitionOwner, fmt.Sprintf("%s/%d: owner %s → %s at epoch %d while %s; re-aligned: %s",
			t.Topic, t.Partition, cmp.Or(t.Previous, "none"), t.Owner, t.Epoch, t.State, t.Summary)
		data.Cause, data.PreviousOwner = "", t.Previous
	}
	src, dst := t.SrcNext, t.DstNext
	return repo.PartitionStateWrite{
		PartitionsSetStateParams: repo.PartitionsSetStateParams{
			Mirror: t.Mirror, Topic: t.Topic, Partition: t.Partition, Owner: t.Owner, Epoch: t.Epoch,
			From: t.State, To: t.State, SrcNext: &src, DstNext: &dst, SourceEnd: t.SourceEnd, DestinationEnd: &dst,
			LostRecordsAdd: t.LostRecordsAdd},
		Event:     repo.Event{Kind: kind, Message: msg, Data: data.raw()},
		OutboxKey: PartitionKey(t.Mirror, t.Topic, t.Partition),
		Realign:   true,
	}
}
