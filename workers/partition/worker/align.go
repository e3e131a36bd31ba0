package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
)

// alignResult is where mirroring resumes after PREPARING.
type alignResult struct {
	checkpoint checkpoint
	// srcEnd is the source's committed end that alignment listed: with
	// the checkpoint (the destination ends at its dstNext), what describe
	// shows once the partition is aligned.
	srcEnd  int64
	lost    int64
	summary string
}

// alignTimeout bounds one alignment (listing offsets, a walk, topic creation).
const alignTimeout = 60 * time.Second

// align is the PREPARING step (docs/design.md, "The copy"): a stock cluster cannot
// truncate, so the worker finds the exact point to resume from and proves it
// by comparing records, or fails with what diverged and where.
func (w *Worker) align(ctx context.Context, desire Desire) (aligned alignResult, failed error) {
	ctx, cancel := context.WithTimeout(ctx, alignTimeout)
	defer cancel()
	src, err := w.p.Sources.Source(ctx, w.key.Mirror)
	if err != nil {
		return alignResult{}, retryable("source: %v", err)
	}
	// The source topic's id is checked while the destination topic is looked
	// up or created: neither needs the other, and each is a round trip of a
	// new topic's start. A recreated source still fails the partition before
	// anything is copied; at most a missing destination topic was created
	// first, as adding the topic again with recreate would do.
	type idCheck struct {
		sourceTopicCheck
		err error
	}
	idChecked := make(chan idCheck, 1)
	go func() {
		c, err := w.checkSourceTopicID(ctx, src, false)
		idChecked <- idCheck{c, err}
	}()
	created, err := w.ensureDestinationTopic(ctx, src, desire)
	// A recreated source fails the partition, unless it continues: then
	// only a proven continuation below accepts the new topic.
	var replaced *sourceTopicReplaced
	id := <-idChecked
	if idErr := id.err; errors.As(idErr, &replaced) && desire.ContinueHistory {
		idErr = nil
	} else if idErr != nil {
		return alignResult{}, idErr
	}
	if id.unrecorded != ([16]byte{}) {
		// None was recorded: the topic's id is recorded once the
		// partition is aligned against it, never before.
		defer func() {
			if failed == nil {
				if failed = w.recordSourceTopicID(ctx, id.unrecorded); failed != nil {
					aligned = alignResult{}
				}
			}
		}()
	}
	if err != nil {
		return alignResult{}, err
	}
	srcOff, err := src.Offsets(ctx, w.key.Topic, w.key.Partition, true)
	if errors.Is(err, kafkaconn.ErrTopicMissing) {
		return alignResult{}, retryable("source topic %s partition %d does not exist", w.key.Topic, w.key.Partition)
	} else if err != nil {
		return alignResult{}, retryable("list source offsets: %v", err)
	}
	defer func() {
		if failed == nil {
			aligned.srcEnd = srcOff.End
		}
	}()
	// A topic this worker has just created is empty: reading its offsets
	// would only wait for it to show in metadata. (A record someone else
	// wrote meanwhile would still be caught: every acknowledgement's offset
	// is checked against the one expected.)
	var dstOff kafkaconn.PartitionOffsets
	if !created || w.row.SrcNext != nil {
		dstOff, err = w.p.Destination.Offsets(ctx, w.dest, w.key.Partition)
		// A topic just created may take a moment to show in metadata.
		for wait := time.Now().Add(5 * time.Second); errors.Is(err, kafkaconn.ErrTopicMissing) && time.Now().Before(wait); {
			time.Sleep(20 * time.Millisecond)
			dstOff, err = w.p.Destination.Offsets(ctx, w.dest, w.key.Partition)
		}
		if err != nil {
			return alignResult{}, retryable("list destination offsets: %v", err)
		}
	}
	E := dstOff.End
	if w.row.SrcNext == nil {
		// First start: the destination partition must hold nothing, unless
		// the topic was added to continue the history it holds.
		if E > dstOff.Start && desire.ContinueHistory {
			release, err := w.readSlot(ctx)
			defer release()
			if err != nil {
				return alignResult{}, err
			}
			return w.continueHistory(ctx, src, desire, replaced, srcOff, dstOff)
		}
		if replaced != nil {
			return alignResult{}, replaced
		}
		if E > dstOff.Start {
			return alignResult{}, permanent("destination %s/%d already holds records [%d, %d) that this mirror did not write; "+
				"remove the topic and add it again with recreate, or with continue if the source was mirrored from this destination "+
				"(a failback), or empty the destination topic",
				w.dest, w.key.Partition, dstOff.Start, E)
		}
		return alignResult{checkpoint: checkpoint{srcNext: srcOff.Start, dstNext: E},
			summary: fmt.Sprintf("new: mirroring from source offset %d", srcOff.Start)}, nil
	}
	s, d := *w.row.SrcNext, *w.row.DstNext
	// A restart with continue whose destination moved on since this mirror
	// stopped: if the other side mirrored back into it (a failback in the
	// other direction), the history is proven afresh from the source.
	if desire.ContinueHistory && E != d {
		release, err := w.readSlot(ctx)
		defer release()
		if err != nil {
			return alignResult{}, err
		}
		res, err := w.continueHistory(ctx, src, desire, replaced, srcOff, dstOff)
		if !errors.Is(err, errNotAFailback) {
			return res, err
		}
	}
	if replaced != nil {
		return alignResult{}, replaced
	}
	// The source's end is the high watermark here: the LSO can trail an
	// open transaction without the log having been truncated.
	srcHWM, err := src.Offsets(ctx, w.key.Topic, w.key.Partition, false)
	if err != nil {
		return alignResult{}, retryable("list source end offsets: %v", err)
	}
	if srcHWM.End < s {
		return alignResult{}, permanent("source %s/%d ends at offset %d, before the checkpoint %d: "+
			"the source topic was truncated or recreated", w.key.Topic, w.key.Partition, srcHWM.End, s)
	}
	var res alignResult
	// The destination ending at the checkpoint proves it (design.md: E = d,
	// resume at s): the checkpoint is progress the previous owner verified,
	// nothing was written past it, and the source topic is the one
	// mirrored, by its id compared above. Only a source without topic ids
	// has its last mirrored record read back on both clusters, which is
	// what catches a source topic recreated there.
	proven := E == d && (w.row.HandedBackDst == d || id.compared)
	if E < d || (E == d && !proven) {
		// The offset map is queried, and a record read back on its own
		// clients. A walk past the checkpoint (E > d) needs no slot: its
		// reads are grouped with the others' of the moment, and so is its
		// checkpoint's save.
		release, err := w.readSlot(ctx)
		defer release()
		if err != nil {
			return alignResult{}, err
		}
	}
	switch {
	case E == d && w.row.HandedBackDst == d:
		// Handed back cleanly at d, and nothing was written since: the
		// previous owner verified every copy up to here, and the source
		// topic's id was checked above.
		res = alignResult{checkpoint: checkpoint{s, d},
			summary: fmt.Sprintf("handed back cleanly at destination offset %d; resuming at source offset %d", d, s)}
	case proven:
		res = alignResult{checkpoint: checkpoint{s, d},
			summary: fmt.Sprintf("resuming at source offset %d: the destination ends at the checkpoint (offset %d)", s, d)}
	case E == d:
		if err := w.verifyLastMirrored(ctx, src, d, srcOff); err != nil {
			return alignResult{}, err
		}
		res = alignResult{checkpoint: checkpoint{s, d}, summary: fmt.Sprintf("resuming at source offset %d", s)}
	case E > d:
		res, err = w.alignForward(ctx, src, s, d, E, srcOff)
	default:
		res, err = w.alignRewind(ctx, src, s, d, E, dstOff.Start)
	}
	if err != nil {
		return alignResult{}, err
	}
	if srcOff.Start > res.checkpoint.srcNext {
		lost := srcOff.Start - res.checkpoint.srcNext
		res.lost = lost
		res.summary += fmt.Sprintf("; %d source offset(s) [%d, %d) were removed by retention before they were mirrored",
			lost, res.checkpoint.srcNext, srcOff.Start)
		res.checkpoint.srcNext = srcOff.Start
	}
	return res, nil
}

// alignForward handles a destination that holds k = E − d records past the
// checkpoint: they must be the next k committed source records, which the
// previous owner wrote before it could checkpoint them.
func (w *Worker) alignForward(ctx context.Context, src Source, s, d, E int64, srcOff kafkaconn.PartitionOffsets) (alignResult, error) {
	k := E - d
	if srcOff.Start > s {
		return alignResult{}, permanent("destination %s/%d holds %d record(s) past the checkpoint, but the source records "+
			"after offset %d were removed by retention, so they cannot be verified", w.dest, w.key.Partition, k, s)
	}
	walked, err := src.Records(ctx, w.key.Topic, w.key.Partition, s, srcOff.End, int(k))
	if err != nil {
		return alignResult{}, retryable("walk source records: %v", err)
	}
	if int64(len(walked)) < k {
		return alignResult{}, permanent("divergence on %s/%d: the destination holds %d record(s) past checkpoint offset %d, "+
			"but the source has only %d committed record(s) after offset %d: someone else wrote to the destination",
			w.key.Topic, w.key.Partition, k, d, len(walked), s)
	}
	last := walked[len(walked)-1]
	if err := w.compareDestinationRange(ctx, walked, d); err != nil {
		return alignResult{}, err
	}
	runs := runsFor(walked, d)
	w.p.Checkpoints.Update(w.key, repo.Checkpoint{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition,
		Epoch: w.lease.Epoch, SrcNext: last.Offset + 1, DstNext: E, SourceEnd: -1, DestinationEnd: E, Runs: runs})
	if err := w.p.Checkpoints.Save(ctx, w.key); err != nil {
		return alignResult{}, retryable("save verified offset map: %v", err)
	}
	return alignResult{checkpoint: checkpoint{last.Offset + 1, E},
		summary: fmt.Sprintf("verified %d record(s) written past the checkpoint; resuming at source offset %d", k, last.Offset+1)}, nil
}

// alignRewind handles a destination that lost records: mirroring restarts
// after the destination's last record, found through the offset map.
func (w *Worker) alignRewind(ctx context.Context, src Source, s, d, E, dstStart int64) (alignResult, error) {
	// Where mirroring began, read before the map is cut back.
	first, err := w.p.OffsetMap.FirstRun(ctx, w.id())
	from := int64(0)
	if err == nil {
		from = first.SrcStart
	} else if !errors.Is(err, repo.ErrNotFound) {
		return alignResult{}, retryable("read offset map: %v", err)
	}
	if err := w.p.OffsetMap.TruncateRuns(ctx, w.fence(), E); err != nil {
		return alignResult{}, retryable("truncate offset map: %v", err)
	}
	if E == 0 || E == dstStart {
		if E > 0 {
			// Records before E are gone; nothing maps there any more.
			if err := w.p.OffsetMap.DeleteRuns(ctx, w.fence()); err != nil {
				return alignResult{}, retryable("clear offset map: %v", err)
			}
		}
		return alignResult{checkpoint: checkpoint{from, E},
			summary: fmt.Sprintf("destination lost its records; re-mirroring from offset %d (its end is %d, the checkpoint was %d)", from, E, d)}, nil
	}
	run, err := w.p.OffsetMap.RunAt(ctx, w.id(), E-1)
	if err != nil {
		return alignResult{}, permanent("destination %s/%d ends at %d, before the checkpoint %d, and offset %d is not in the offset map: cannot rewind safely",
			w.dest, w.key.Partition, E, d, E-1)
	}
	srcLast := run.SrcStart + (E - 1 - run.DstStart)
	recs, err := src.Records(ctx, w.key.Topic, w.key.Partition, srcLast, srcLast+1, 1)
	if err != nil {
		return alignResult{}, retryable("read source record %d: %v", srcLast, err)
	}
	if len(recs) == 1 && recs[0].Offset == srcLast {
		if err := w.compareDestination(ctx, recs[0], E-1); err != nil {
			return alignResult{}, err
		}
	}
	return alignResult{checkpoint: checkpoint{srcLast + 1, E},
		summary: fmt.Sprintf("destination lost its records after offset %d; re-mirroring from offset %d (the checkpoint was %d)", E-1, srcLast+1, d)}, nil
}

// verifyLastMirrored checks, when the destination ends exactly at the
// checkpoint, that the source still holds the last mirrored record at the
// same offset. A source topic deleted and recreated with at least as many
// records passes the end-offset check, and resuming would silently append
// another topic's records. Only a different record at that offset fails:
// a record that is gone (retention, compaction) or unreadable cannot be
// verified, and mirroring resumes as before.
func (w *Worker) verifyLastMirrored(ctx context.Context, src Source, d int64, srcOff kafkaconn.PartitionOffsets) error {
	if d == 0 {
		return nil
	}
	run, err := w.p.OffsetMap.RunAt(ctx, w.id(), d-1)
	if errors.Is(err, repo.ErrNotFound) {
		return nil
	} else if err != nil {
		return retryable("read offset map: %v", err)
	}
	srcLast := run.SrcStart + (d - 1 - run.DstStart)
	if srcLast < srcOff.Start {
		return nil
	}
	recs, err := src.Records(ctx, w.key.Topic, w.key.Partition, srcLast, srcLast+1, 1)
	if err != nil {
		return retryable("read source record %d: %v", srcLast, err)
	}
	if len(recs) != 1 || recs[0].Offset != srcLast {
		return nil
	}
	got, err := w.p.Destination.Records(ctx, w.dest, w.key.Partition, d-1, d, 1)
	if err != nil {
		return retryable("read destination record %d: %v", d-1, err)
	}
	if len(got) != 1 || got[0].Offset != d-1 {
		return nil
	}
	if err := kafkaconn.SameRecord(recs[0], got[0]); err != nil {
		return permanent("source %s/%d offset %d no longer holds the record mirrored to destination offset %d (%v): "+
			"the source topic was recreated or rewritten", w.key.Topic, w.key.Partition, srcLast, d-1, err)
	}
	return nil
}

// compareDestination checks that destination record at dstOffset equals the
// source record.
func (w *Worker) compareDestination(ctx context.Context, want *kgo.Record, dstOffset int64) error {
	return w.compareDestinationRange(ctx, []*kgo.Record{want}, dstOffset)
}

// compareDestinationRange checks that the destination records from
// dstStart on are want, one for one. Comparing only the last one would pass
// a destination that skipped a record and repeated another when neighbours
// are equal (records often share a timestamp and a value); every record is
// compared instead, which costs one more read of the k records that the
// walk of the source has read already. A record the destination cannot
// serve (compacted away) is not compared, but the last one must be there.
func (w *Worker) compareDestinationRange(ctx context.Context, want []*kgo.Record, dstStart int64) error {
	end := dstStart + int64(len(want))
	got, err := w.p.Destination.Records(ctx, w.dest, w.key.Partition, dstStart, end, len(want))
	if err != nil {
		return retryable("read destination records [%d, %d): %v", dstStart, end, err)
	}
	if len(got) == 0 || got[len(got)-1].Offset != end-1 {
		return retryable("destination record %s/%d@%d could not be read", w.dest, w.key.Partition, end-1)
	}
	for _, g := range got {
		i := g.Offset - dstStart
		if i < 0 || i >= int64(len(want)) {
			continue
		}
		if err := kafkaconn.SameRecord(want[i], g); err != nil {
			return permanent("divergence on %s/%d: destination offset %d does not match source offset %d (%v): "+
				"records were written to the destination by someone else; remove the topic and add it with recreate to start over",
				w.key.Topic, w.key.Partition, g.Offset, want[i].Offset, err)
		}
	}
	return nil
}

// runsFor maps consecutive records to destination offsets from dstStart.
func runsFor(recs []*kgo.Record, dstStart int64) []repo.OffsetRun {
	var runs []repo.OffsetRun
	for i, r := range recs {
		dst := dstStart + int64(i)
		if n := len(runs); n > 0 && runs[n-1].SrcStart+runs[n-1].Count == r.Offset {
			runs[n-1].Count++
			continue
		}
		runs = append(runs, repo.OffsetRun{SrcStart: r.Offset, DstStart: dst, Count: 1})
	}
	return runs
}

// ensureDestinationTopic creates the destination topic with the source's
// partition count when it is missing. The topic's partitions preparing
// together share one look and one create: each then knows the topic is
// new, rather than being told it already exists and reading its offsets
// through metadata that does not show it yet (a 20 ms wait that would
// delay the last partition's start).
func (w *Worker) ensureDestinationTopic(ctx context.Context, src Source, desire Desire) (created bool, err error) {
	t, err := w.p.Destination.EnsureTopic(ctx, w.dest, int16(desire.ReplicationFactor), func(ctx context.Context) (TopicSpec, error) {
		return src.Spec(ctx, w.key.Topic)
	})
	if err != nil {
		return false, err
	}
	if t.Partitions >= 0 && int32(t.Partitions) <= w.key.Partition {
		return false, retryable("destination topic %s has %d partition(s); partition %d is missing", w.dest, t.Partitions, w.key.Partition)
	}
	return t.Created, nil
}
