package service

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// proveByRecords proves an overlap that no offset map describes (the
// destination was filled by another tool, or the source has no
// __mirror_state): the destination's last record is looked up on the source
// by its timestamp, and the destination's last records up to it are
// compared one by one with the source's. The compared pairs are the offset
// map mirroring starts with; older destination records are not compared.
func proveByRecords(ctx context.Context, in ContinuationInput, pc PartitionContinuation) (PartitionContinuation, error) {
	topic, p := in.Topic, in.Partition // the source's name; the destination's is in.dstTopic()
	dstStart, E := in.DestinationOffsets.Start, in.DestinationOffsets.End
	dst, err := lastRecords(ctx, in.Destination, in.dstTopic(), p, dstStart, E, recordProofWindow)
	if err != nil {
		return pc, fmt.Errorf("read the destination's last records: %w", err)
	}
	if len(dst) == 0 {
		return refuse(pc, "the destination holds offsets [%d, %d) but no committed record in them, and the source's %s "+
			"has no mirror of this partition: there is nothing to prove a match by; remove the topic and add it again with recreate",
			dstStart, E, StateTopic), nil
	}
	last := dst[len(dst)-1]
	listed, err := in.SourceAdmin.ListOffsetsAfterMilli(ctx, last.Timestamp.UnixMilli(), topic)
	if err != nil {
		return pc, fmt.Errorf("look up source offsets by time: %w", err)
	}
	at, ok := listed.Lookup(topic, p)
	if !ok || at.Err != nil {
		return pc, fmt.Errorf("look up source offsets by time for %s/%d: %v", topic, p, at.Err)
	}
	from := max(at.Offset, in.SourceOffsets.Start)
	var candidates []*kgo.Record
	if at.Offset >= 0 && from < in.SourceOffsets.End {
		end := min(in.SourceOffsets.End, from+recordProofScan)
		candidates, err = kafkaconn.ReadRecords(ctx, in.Source, topic, p, from, end, int(end-from), true, in.SourceOpts...)
		if err != nil {
			return pc, fmt.Errorf("read the source from offset %d: %w", from, err)
		}
	}
	for _, c := range candidates {
		if kafkaconn.SameRecord(c, last) != nil {
			continue
		}
		src, err := lastRecords(ctx, in.Source, topic, p, in.SourceOffsets.Start, c.Offset+1, len(dst), in.SourceOpts...)
		if err != nil {
			return pc, fmt.Errorf("read the source up to offset %d: %w", c.Offset, err)
		}
		n := min(len(src), len(dst))
		if !sameRecords(src[len(src)-n:], dst[len(dst)-n:]) {
			continue // the same record again, with other history before it
		}
		return overlapByRecords(pc, src[len(src)-n:], dst[len(dst)-n:], dstStart), nil
	}
	return refuse(pc, "the source's %s has no mirror of this partition, and the destination's last record (offset %d) was not "+
		"found among the %d source record(s) from the first with its timestamp, with the same %d record(s) before it: the "+
		"destination's records cannot be proven to be the source's history; remove the topic and add it again with recreate",
		StateTopic, last.Offset, len(candidates), len(dst)-1), nil
}

// overlapByRecords is the plan of a proof by records: src[i] and dst[i] are
// the same record.
func overlapByRecords(pc PartitionContinuation, src, dst []*kgo.Record, dstStart int64) PartitionContinuation {
	var runs []repo.OffsetRun
	for i := range src {
		s, d := src[i].Offset, dst[i].Offset
		if n := len(runs); n > 0 && runs[n-1].SrcStart+runs[n-1].Count == s && runs[n-1].DstStart+runs[n-1].Count == d {
			runs[n-1].Count++
			continue
		}
		runs = append(runs, repo.OffsetRun{SrcStart: s, DstStart: d, Count: 1})
	}
	n := len(src)
	lastSrc, lastDst := src[n-1].Offset, dst[n-1].Offset
	pc.Outcome, pc.Proof, pc.Runs = ContinueAfterOverlap, ProofRecords, runs
	pc.OverlapSourceOffset, pc.OverlapDestinationOffset = &lastSrc, &lastDst
	pc.SrcNext, pc.DstNext = lastSrc+1, pc.DestinationEndOffset
	pc.RecordsToCopy = max(pc.SourceEndOffset-(lastSrc+1), 0)
	pc.Detail = fmt.Sprintf("the destination's last %d record(s), offsets %d to %d, are the source's at offsets %d to %d, "+
		"compared one by one (key, value, headers, timestamp); mirroring from source offset %d",
		n, dst[0].Offset, lastDst, src[0].Offset, lastSrc, lastSrc+1)
	if dst[0].Offset > dstStart {
		pc.Detail += fmt.Sprintf("; destination offsets [%d, %d) were not compared and are not in the offset map",
			dstStart, dst[0].Offset)
	}
	return pc
}

func sameRecords(a, b []*kgo.Record) bool {
	for i := range a {
		if kafkaconn.SameRecord(a[i], b[i]) != nil {
			return false
		}
	}
	return true
}

// lastRecords returns up to want of the committed records at offsets
// [start, end), the last ones: it reads backwards from end in widening
// steps, since transaction markers and aborted records take offsets too.
// Each step reads only the offsets before what the earlier steps read.
func lastRecords(ctx context.Context, conn kafkaconn.Config, topic string, partition int32, start, end int64, want int, opts ...kgo.Opt) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	upTo, step := end, int64(want)
	for len(recs) < want && upTo > start {
		from := max(start, upTo-step)
		older, err := kafkaconn.ReadRecords(ctx, conn, topic, partition, from, upTo, int(upTo-from), true, opts...)
		if err != nil {
			return nil, err
		}
		recs = append(older, recs...)
		upTo, step = from, step*2
	}
	return recs[max(len(recs)-want, 0):], nil
}
