package worker

import (
	"context"
	"errors"
	"fmt"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
)

// Failback: continuing the history a destination already holds. The proof
// is service.ProveContinuation's (an add's dry run runs it too); here the
// worker reads the source's __mirror_state, runs it, and saves the offset
// map and the divergent tail it continues with.

// errNotAFailback: a restarted partition's destination moved past its
// checkpoint, but no mirror in the source's state wrote there.
var errNotAFailback = errors.New("not a failback")

// continueHistory aligns a partition added with continue whose destination
// holds records [dstOff.Start, E) it did not write: on its first start, or
// on a restart after another mirror wrote into it (errNotAFailback when
// none did). When the source topic was recreated (replaced is not nil), the
// new topic's id is recorded once its history is proven.
func (w *Worker) continueHistory(ctx context.Context, src Source, desire Desire, replaced *sourceTopicReplaced,
	srcOff, dstOff kafkaconn.PartitionOffsets) (alignResult, error) {
	topic, p := w.key.Topic, w.key.Partition
	snap, err := src.MirrorState(ctx)
	if err != nil {
		return alignResult{}, retryable("continue %s/%d: read the source's %s: %v", topic, p, service.StateTopic, err)
	}
	if w.row.DstNext != nil && !service.MovedByAFailback(snap, topic, w.dest, p, dstOff.End, *w.row.DstNext) {
		// A restart whose destination moved for another reason (this
		// mirror's own copies past its checkpoint) is aligned as usual.
		return alignResult{}, errNotAFailback
	}
	pc, err := src.ProveContinuation(ctx, service.ContinuationInput{Topic: topic, DestTopic: w.dest, Partition: p,
		SourceState: snap, SourceOffsets: srcOff, DestinationOffsets: dstOff, KeepDivergent: desire.KeepDivergent})
	if err != nil {
		return alignResult{}, retryable("continue %s/%d: %v", topic, p, err)
	}
	if pc.Outcome == service.ContinueRefused {
		return alignResult{}, permanent("continue %s/%d: %s", topic, p, pc.Detail)
	}
	summary := "continued: " + pc.Detail
	if replaced != nil {
		// Before the checkpoint: once it is saved, a retry would find the
		// destination where it expects and no longer prove anything.
		if err := w.acceptNewSourceTopic(ctx, replaced); err != nil {
			return alignResult{}, err
		}
		summary += fmt.Sprintf("; the source topic was recreated (topic id %x) and holds this history: mirroring it", replaced.id)
	}
	if w.row.SrcNext != nil {
		// A restart: the map this mirror kept from its earlier life is a
		// part of the one just proven, which covers the whole history.
		if err := w.p.OffsetMap.DeleteRuns(ctx, w.fence()); err != nil {
			return alignResult{}, retryable("continue %s/%d: clear the earlier offset map: %v", topic, p, err)
		}
	}
	// The tail first: a crash between the two leaves it recorded and the
	// partition PREPARING, which proves it again.
	if err := w.p.Topics.KeepDivergentTail(ctx, w.fence(), pc.DivergentTail); err != nil {
		return alignResult{}, retryable("continue %s/%d: record the divergent tail: %v", topic, p, err)
	}
	w.p.Checkpoints.Update(w.key, repo.Checkpoint{Mirror: w.key.Mirror, Topic: topic, Partition: p, Epoch: w.lease.Epoch,
		SrcNext: pc.SrcNext, DstNext: pc.DstNext, SourceEnd: -1, DestinationEnd: pc.DstNext, Runs: pc.Runs})
	if err := w.p.Checkpoints.Save(ctx, w.key); err != nil {
		return alignResult{}, retryable("save the continued offset map: %v", err)
	}
	return alignResult{checkpoint: checkpoint{srcNext: pc.SrcNext, dstNext: pc.DstNext}, summary: summary}, nil
}
