package service

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// Continuing what a destination already holds (topics:add with continue).
//
// After a failover from cluster A to cluster B, B is the primary; failing
// back mirrors B into A again. A still holds everything that was copied
// from it to B, so B's history need not be copied back: B's own
// __mirror_state, written by the kmirror that mirrored A into B, holds the
// offset map of that copy (A's offsets to B's) and each partition's last
// mirrored offsets. ProveContinuation proves the overlap from them and
// compares its last record on both clusters; the old map reversed starts the
// new one, so translation is exact across the whole log. Where the source's
// __mirror_state has no mirror of the partition, the destination's last
// records are looked up on the source and compared one by one instead.
//
// The partition workers run it when a partition starts; an add's dry run
// runs it to report what each partition would do.
//
// A topic has a name on each cluster: the destination's is the mirror's
// topic.name.prefix and the source's (ContinuationInput.DestTopic). The old
// mirror's records name its own source topic, which is this mirror's
// destination topic, and it wrote that topic under its own prefix: it
// copied this partition only if that name is this mirror's source topic
// (StoppedMirrorsOf). With a prefix on either side the names cannot
// line up, so a prefixed topic is proven by records (proveByRecords), as
// one copied by another tool (MirrorMaker 2's "east.orders") is.

// ContinuationOutcome is what continuing a partition does.
type ContinuationOutcome string

const (
	// ContinueCopy: the destination partition holds nothing; it is copied
	// from the source's start as any new topic is.
	ContinueCopy ContinuationOutcome = "copy"
	// ContinueResume: the partition restarts from this mirror's own
	// checkpoint; the destination did not move since it stopped.
	ContinueResume ContinuationOutcome = "resume"
	// ContinueAfterOverlap: the destination's records are proven to be the
	// source's history; only what follows the overlap is copied.
	ContinueAfterOverlap ContinuationOutcome = "continue"
	// ContinueRefused: the overlap cannot be proven, or a divergent tail was
	// found without keep_divergent; the partition would go FAILED.
	ContinueRefused ContinuationOutcome = "fail"
)

// ContinuationProof says how an overlap was proven.
type ContinuationProof string

const (
	// ProofOffsetMap: by the offset map of the mirror that copied the other
	// way, read from the source's __mirror_state, and its last record
	// compared on both clusters.
	ProofOffsetMap ContinuationProof = "offset_map"
	// ProofRecords: by finding the destination's last records on the source
	// and comparing them one by one.
	ProofRecords ContinuationProof = "records"
)

// recordProofWindow is how many of the destination's last records a proof
// by records compares; recordProofScan is how far past the first source
// offset with the last record's timestamp it looks for that record.
const (
	recordProofWindow = 1000
	recordProofScan   = 10000
)

// PartitionContinuation is what continuing one partition's destination
// does: how its overlap with the source was proven, what is left to copy,
// and the divergent tail, if any.
type PartitionContinuation struct {
	Partition int32               `json:"partition"`
	Outcome   ContinuationOutcome `json:"outcome"`
	Proof     ContinuationProof   `json:"proof,omitempty"`
	// ProvenBy names the mirror whose offset map proved the overlap.
	ProvenBy string `json:"proven_by,omitempty"`
	// The destination's offsets [start, end) and the source's end (its last
	// stable offset) when this was worked out.
	DestinationStartOffset int64 `json:"destination_start_offset"`
	DestinationEndOffset   int64 `json:"destination_end_offset"`
	SourceEndOffset        int64 `json:"source_end_offset"`
	// The last source and destination offsets of the proven overlap: the
	// last record both hold.
	OverlapSourceOffset      *int64 `json:"overlap_source_offset,omitempty"`
	OverlapDestinationOffset *int64 `json:"overlap_destination_offset,omitempty"`
	// RecordsToCopy is the source offsets from where mirroring starts to the
	// source's end: an upper bound on the records copied (transaction
	// markers and aborted records are counted, and never copied).
	RecordsToCopy int64 `json:"records_to_copy"`
	// DivergentTail is what the destination holds past the overlap that the
	// source never had.
	DivergentTail *DivergentTail `json:"divergent_tail,omitempty"`
	// Detail says how the overlap was proven, or why it cannot be.
	Detail string `json:"detail"`

	// Where mirroring starts, and the offset map it starts with.
	SrcNext int64            `json:"-"`
	DstNext int64            `json:"-"`
	Runs    []repo.OffsetRun `json:"-"`
}

// DivergentTail is a range of destination offsets holding records that the
// source never had: written after the mirror in the other direction last
// read the destination.
type DivergentTail = repo.DivergentTail

// ContinuationInput is what proving one partition's continuation reads.
type ContinuationInput struct {
	// Topic is the source topic's name, and DestTopic the destination
	// topic's ("": the same name).
	Topic     string
	DestTopic string
	Partition int32
	// Source and Destination are the clusters; SourceAdmin lists the
	// source's offsets. SourceOpts are added to the source's reading clients.
	Source      kafkaconn.Config
	SourceAdmin *kadm.Client
	SourceOpts  []kgo.Opt
	Destination kafkaconn.Config
	// SourceState is the source cluster's __mirror_state, decoded (empty
	// when the source has none).
	SourceState StateSnapshot
	// The source's offsets (end: the last stable offset) and the
	// destination's.
	SourceOffsets, DestinationOffsets kafkaconn.PartitionOffsets
	// KeepDivergent continues after a divergent tail instead of refusing.
	KeepDivergent bool
}

// dstTopic is the destination topic's name.
func (in ContinuationInput) dstTopic() string {
	if in.DestTopic != "" {
		return in.DestTopic
	}
	return in.Topic
}

// StoppedMirrorsOf returns the mirrors in a cluster's __mirror_state (this
// mirror's source) that copied partition `partition` of dstTopic, a topic
// of this mirror's destination, into srcTopic on that cluster, and
// recorded where they stopped. A record names its mirror's source topic;
// the topic it wrote is that name under its mirror's topic.name.prefix.
func StoppedMirrorsOf(snap StateSnapshot, srcTopic, dstTopic string, partition int32) []PartitionRecord {
	var found []PartitionRecord
	var prefixes map[string]string
	for _, r := range snap.Partitions {
		if r.Topic != dstTopic || r.Partition != partition || r.LastMirroredSrc == nil || r.LastMirroredDst == nil {
			continue
		}
		if prefixes == nil {
			prefixes = make(map[string]string, len(snap.Mirrors))
			for _, m := range snap.Mirrors {
				prefixes[m.Name] = m.Config[CfgTopicNamePrefix]
			}
		}
		if prefixes[r.Mirror]+r.Topic == srcTopic {
			found = append(found, r)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Mirror < found[j].Mirror })
	return found
}

// ProveContinuation works out how a partition added with continue goes on
// from what its destination holds. A refusal is an answer (Outcome
// ContinueRefused, Detail says why); an error is a read that failed and may
// be tried again.
func ProveContinuation(ctx context.Context, in ContinuationInput) (PartitionContinuation, error) {
	E := in.DestinationOffsets.End
	pc := PartitionContinuation{Partition: in.Partition, DestinationStartOffset: in.DestinationOffsets.Start,
		DestinationEndOffset: E, SourceEndOffset: in.SourceOffsets.End}
	if E <= in.DestinationOffsets.Start {
		pc.Outcome, pc.SrcNext, pc.DstNext = ContinueCopy, in.SourceOffsets.Start, E
		pc.RecordsToCopy = max(in.SourceOffsets.End-in.SourceOffsets.Start, 0)
		pc.Detail = fmt.Sprintf("the destination holds nothing: mirroring from source offset %d", in.SourceOffsets.Start)
		return pc, nil
	}
	switch found := StoppedMirrorsOf(in.SourceState, in.Topic, in.dstTopic(), in.Partition); len(found) {
	case 0:
		return proveByRecords(ctx, in, pc)
	case 1:
		return proveByOffsetMap(ctx, in, pc, found[0])
	default:
		return refuse(pc, "the source's %s has %d mirrors of this partition (%s, %s); which one copied this destination is not known",
			StateTopic, len(found), found[0].Mirror, found[1].Mirror), nil
	}
}

func refuse(pc PartitionContinuation, format string, args ...any) PartitionContinuation {
	pc.Outcome, pc.Detail = ContinueRefused, fmt.Sprintf(format, args...)
	return pc
}

// proveByOffsetMap proves the overlap from old, the mirror that copied this
// destination (its source) into the source (its destination).
func proveByOffsetMap(ctx context.Context, in ContinuationInput, pc PartitionContinuation, old PartitionRecord) (PartitionContinuation, error) {
	p, E := in.Partition, in.DestinationOffsets.End
	if old.State != StateStopped {
		return refuse(pc, "mirror %s on the source's side is %s, not STOPPED: fail it over there first (topics:remove), "+
			"or the two mirrors would copy each other's records", old.Mirror, old.State), nil
	}
	// The old mirror's source offsets are this destination's.
	lastDst, lastSrc := *old.LastMirroredSrc, *old.LastMirroredDst
	pc.ProvenBy = old.Mirror
	if E <= lastDst {
		return refuse(pc, "the destination ends at offset %d, before the last mirrored offset %d that mirror %s copied from it: "+
			"it lost records since; remove the topic and add it again with recreate", E, lastDst, old.Mirror), nil
	}
	if lastSrc+1 > in.SourceOffsets.End {
		return refuse(pc, "the source ends at offset %d, before the last mirrored offset %d of mirror %s: "+
			"the source topic was truncated or recreated", in.SourceOffsets.End, lastSrc, old.Mirror), nil
	}
	if E > lastDst+1 {
		// Past the last mirrored record there may be only transaction
		// markers and aborted records, which were never to be copied.
		tail, err := kafkaconn.ReadRecords(ctx, in.Destination, in.dstTopic(), p, lastDst+1, E, int(E-lastDst-1), true)
		if err != nil {
			return pc, fmt.Errorf("read the destination past the last mirrored offset %d: %w", lastDst, err)
		}
		if n := len(tail); n > 0 {
			pc.DivergentTail = &DivergentTail{Start: tail[0].Offset, End: tail[n-1].Offset + 1, Records: int64(n)}
		}
	}
	if t := pc.DivergentTail; t != nil && !in.KeepDivergent {
		return refuse(pc, "the destination holds %d record(s) at offsets [%d, %d) past the last mirrored offset %d that the "+
			"source never had (a divergent tail, written after mirror %s last read it); remove the topic and add it again "+
			"with recreate to replace them with the source's, or with continue and keep_divergent to keep them and mirror after them",
			t.Records, t.Start, t.End, lastDst, old.Mirror), nil
	}
	if msg, err := compareRecordPair(ctx, in, lastDst, lastSrc); err != nil || msg != "" {
		return refuse(pc, "%s", msg), err
	}
	// The old map, reversed: the old destination's offsets (this mirror's
	// source) to the old source's (this destination), in source order. It
	// is keyed by the old mirror's source topic: this destination's.
	var runs []repo.OffsetRun
	for _, r := range in.SourceState.OffsetMaps[repo.PartitionID{Mirror: old.Mirror, Topic: old.Topic, Partition: p}] {
		runs = append(runs, repo.OffsetRun{SrcStart: r.DstStart, DstStart: r.SrcStart, Count: r.Count})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].SrcStart < runs[j].SrcStart })
	if n := len(runs); n == 0 || runs[n-1].SrcStart+runs[n-1].Count-1 != lastSrc || runs[n-1].DstStart+runs[n-1].Count-1 != lastDst {
		return refuse(pc, "mirror %s's offset map in the source's %s does not end at its last mirrored offsets (%d → %d); "+
			"it cannot be trusted to translate", old.Mirror, StateTopic, lastDst, lastSrc), nil
	}
	pc.Outcome, pc.Proof, pc.Runs = ContinueAfterOverlap, ProofOffsetMap, runs
	pc.OverlapSourceOffset, pc.OverlapDestinationOffset = &lastSrc, &lastDst
	pc.SrcNext, pc.DstNext = lastSrc+1, E
	pc.RecordsToCopy = max(in.SourceOffsets.End-(lastSrc+1), 0)
	pc.Detail = fmt.Sprintf("destination offsets up to %d are the source's up to %d, by mirror %s's offset map in the source's %s "+
		"(last records compared); mirroring from source offset %d", lastDst, lastSrc, old.Mirror, StateTopic, lastSrc+1)
	if t := pc.DivergentTail; t != nil {
		pc.Detail += fmt.Sprintf("; kept a divergent tail of %d record(s) at destination offsets [%d, %d) that the source never had",
			t.Records, t.Start, t.End)
	}
	return pc, nil
}

// compareRecordPair reads the destination's record at dstOffset and the
// source's at srcOffset and says why they are not the same record ("" when
// they are).
func compareRecordPair(ctx context.Context, in ContinuationInput, dstOffset, srcOffset int64) (string, error) {
	got, err := kafkaconn.ReadRecords(ctx, in.Destination, in.dstTopic(), in.Partition, dstOffset, dstOffset+1, 1, false)
	if err != nil {
		return "", fmt.Errorf("read destination record %d: %w", dstOffset, err)
	}
	want, err := kafkaconn.ReadRecords(ctx, in.Source, in.Topic, in.Partition, srcOffset, srcOffset+1, 1, true, in.SourceOpts...)
	if err != nil {
		return "", fmt.Errorf("read source record %d: %w", srcOffset, err)
	}
	if len(got) != 1 || got[0].Offset != dstOffset || len(want) != 1 || want[0].Offset != srcOffset {
		return fmt.Sprintf("the last mirrored records (destination offset %d, source offset %d) cannot both be read "+
			"(compacted or removed by retention), so the overlap cannot be proven; add the topic with recreate", dstOffset, srcOffset), nil
	}
	if err := kafkaconn.SameRecord(want[0], got[0]); err != nil {
		return fmt.Sprintf("destination offset %d and source offset %d, the last records the old mirror copied, differ (%v): "+
			"the destination is not the source's history; add the topic with recreate", dstOffset, srcOffset, err), nil
	}
	return "", nil
}
