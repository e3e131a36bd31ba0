package partition

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"kmirror/internal/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
)

// Failback: continuing the history a destination already holds.
//
// After a failover from cluster A to cluster B, B is the primary; failing
// back mirrors B into A again. A still holds everything kmirror copied from
// it to B, so copying B's whole history back is not needed: B's own
// __mirror_state, written by the kmirror that mirrored A into B, holds the
// offset map of that copy (A's offsets to B's) and the last mirrored
// offsets of each partition. A topic added with continue proves the overlap
// from them, compares the overlap's last record on both clusters, takes the
// old map reversed as the start of its own (so translation is exact across
// the whole log), and mirrors B's records after the last mirrored one.

// sourceStateFresh is how long a source's __mirror_state, once read, serves
// the partitions that prepare after it: a topic's partitions continue
// together, and each read is the whole topic.
const sourceStateFresh = 5 * time.Second

// sourceStates caches each mirror's read of its source's __mirror_state.
type sourceStates struct {
	mu    sync.Mutex // held while reading: the others wait and share
	reads map[string]sourceStateRead
}

type sourceStateRead struct {
	at   time.Time
	snap service.StateSnapshot
}

// sourceState returns the decoded __mirror_state of a mirror's source
// cluster.
func (e *Engine) sourceState(ctx context.Context, mirror string, conn kafkaconn.Config) (service.StateSnapshot, error) {
	if e.cfg.SourceState == nil {
		return service.StateSnapshot{}, fmt.Errorf("this instance cannot read a source's %s", service.StateTopic)
	}
	s := &e.srcStates
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.reads[mirror]; ok && time.Since(r.at) < sourceStateFresh {
		return r.snap, nil
	}
	latest, err := e.cfg.SourceState(ctx, conn)
	if errors.Is(err, service.ErrStateTopicMissing) {
		latest, err = nil, nil // a source no kmirror wrote to: nothing to prove by
	}
	if err != nil {
		return service.StateSnapshot{}, err
	}
	snap, err := service.DecodeState(latest)
	if err != nil {
		return service.StateSnapshot{}, err
	}
	if s.reads == nil {
		s.reads = map[string]sourceStateRead{}
	}
	s.reads[mirror] = sourceStateRead{at: time.Now(), snap: snap}
	return snap, nil
}

// errNotAFailback: a restarted partition's destination moved past its
// checkpoint, but no mirror in the source's state wrote there.
var errNotAFailback = errors.New("not a failback")

// continueHistory aligns a partition added with continue whose destination
// holds records [dstOff.Start, E) it did not write: on its first start, or
// on a restart after another mirror wrote into it (errNotAFailback when
// none did).
func (w *partitionWorker) continueHistory(ctx context.Context, src *sourceClients, srcOff, dstOff kafkaconn.PartitionOffsets) (alignResult, error) {
	topic, p, E := w.key.Topic, w.key.Partition, dstOff.End
	snap, err := w.e.sourceState(ctx, w.key.Mirror, src.conn)
	if err != nil {
		return alignResult{}, retryable("continue %s/%d: read the source's %s: %v", topic, p, service.StateTopic, err)
	}
	var found []service.PartitionRecord
	for _, r := range snap.Partitions {
		if r.Topic == topic && r.Partition == p && r.LastMirroredSrc != nil && r.LastMirroredDst != nil {
			found = append(found, r)
		}
	}
	if w.row.DstNext != nil && (len(found) != 1 || *found[0].LastMirroredSrc < *w.row.DstNext) {
		// A restart whose destination moved for another reason (this
		// mirror's own copies past its checkpoint): aligned as usual.
		return alignResult{}, errNotAFailback
	}
	switch {
	case len(found) == 0:
		return alignResult{}, permanent("continue %s/%d: the source's %s has no mirror of this partition with last mirrored "+
			"offsets, so the %d record(s) the destination holds cannot be proven to be the source's history; "+
			"remove the topic and add it again with recreate to copy it whole", topic, p, service.StateTopic, E-dstOff.Start)
	case len(found) > 1:
		return alignResult{}, permanent("continue %s/%d: the source's %s has %d mirrors of this partition (%s, %s); "+
			"which one copied this destination is not known", topic, p, service.StateTopic, len(found), found[0].Mirror, found[1].Mirror)
	}
	old := found[0]
	if old.State != service.StateStopped {
		return alignResult{}, permanent("continue %s/%d: mirror %s on the source's side is %s, not STOPPED: fail it over there first "+
			"(topics:remove), or the two mirrors would copy each other's records", topic, p, old.Mirror, old.State)
	}
	// The old mirror copied this destination's offsets (its source) to the
	// source's (its destination).
	lastDst, lastSrc := *old.LastMirroredSrc, *old.LastMirroredDst
	if E > lastDst+1 {
		// Past the last mirrored record there may be only transaction
		// markers and aborted records, which were never to be copied.
		tail, err := kafkaconn.ReadRecords(ctx, w.e.cfg.Destination, topic, p, lastDst+1, E, int(E-lastDst-1), true)
		if err != nil {
			return alignResult{}, retryable("continue %s/%d: read the destination past the last mirrored offset %d: %v", topic, p, lastDst, err)
		}
		if len(tail) > 0 {
			return alignResult{}, permanent("continue %s/%d: the destination holds %d record(s) at offsets [%d, %d) past the last "+
				"mirrored offset %d that the source never had (a divergent tail, written after mirror %s last read it); "+
				"remove the topic and add it again with recreate to replace them with the source's",
				topic, p, len(tail), tail[0].Offset, tail[len(tail)-1].Offset+1, lastDst, old.Mirror)
		}
	}
	switch {
	case E <= lastDst:
		return alignResult{}, permanent("continue %s/%d: the destination ends at offset %d, before the last mirrored offset %d "+
			"that mirror %s copied from it: it lost records since; remove the topic and add it again with recreate",
			topic, p, E, lastDst, old.Mirror)
	}
	if lastSrc+1 > srcOff.End {
		return alignResult{}, permanent("continue %s/%d: the source ends at offset %d, before the last mirrored offset %d "+
			"of mirror %s: the source topic was truncated or recreated", topic, p, srcOff.End, lastSrc, old.Mirror)
	}
	if err := w.compareOverlapEnd(ctx, src, lastDst, lastSrc); err != nil {
		return alignResult{}, err
	}
	// The old map, reversed: this mirror's source offsets (the old
	// destination's) to this destination's, in source order.
	var runs []repo.OffsetRun
	id := repo.PartitionID{Mirror: old.Mirror, Topic: topic, Partition: p}
	for _, r := range snap.OffsetMaps[id] {
		runs = append(runs, repo.OffsetRun{SrcStart: r.DstStart, DstStart: r.SrcStart, Count: r.Count})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].SrcStart < runs[j].SrcStart })
	if n := len(runs); n == 0 || runs[n-1].SrcStart+runs[n-1].Count-1 != lastSrc || runs[n-1].DstStart+runs[n-1].Count-1 != lastDst {
		return alignResult{}, permanent("continue %s/%d: mirror %s's offset map in the source's %s does not end at its last mirrored "+
			"offsets (%d → %d); it cannot be trusted to translate", topic, p, old.Mirror, service.StateTopic, lastDst, lastSrc)
	}
	if w.row.SrcNext != nil {
		// A restart: the map this mirror kept from its earlier life is a
		// part of the one just read, which covers the whole history.
		if err := repo.OffsetRunsDelete(ctx, w.e.cfg.Pool, w.fence()); err != nil {
			return alignResult{}, retryable("continue %s/%d: clear the earlier offset map: %v", topic, p, err)
		}
	}
	w.e.cp.update(w.key, repo.Checkpoint{Mirror: w.key.Mirror, Topic: topic, Partition: p, Epoch: w.lease.Epoch,
		SrcNext: lastSrc + 1, DstNext: E, SourceEnd: -1, DestinationEnd: E, Runs: runs})
	if err := w.e.cp.flushKey(ctx, w.key); err != nil {
		return alignResult{}, retryable("save the continued offset map: %v", err)
	}
	return alignResult{checkpoint: checkpoint{srcNext: lastSrc + 1, dstNext: E},
		summary: fmt.Sprintf("continued: destination offsets up to %d are the source's up to %d, by mirror %s's offset map "+
			"in the source's %s (last records compared); mirroring from source offset %d",
			lastDst, lastSrc, old.Mirror, service.StateTopic, lastSrc+1)}, nil
}

// compareOverlapEnd checks that the destination's record at dstOffset and
// the source's at srcOffset, the last one the old mirror copied, are the
// same record: the old map is trusted only then.
func (w *partitionWorker) compareOverlapEnd(ctx context.Context, src *sourceClients, dstOffset, srcOffset int64) error {
	topic, p := w.key.Topic, w.key.Partition
	got, err := kafkaconn.ReadRecords(ctx, w.e.cfg.Destination, topic, p, dstOffset, dstOffset+1, 1, false)
	if err != nil {
		return retryable("continue %s/%d: read destination record %d: %v", topic, p, dstOffset, err)
	}
	want, err := kafkaconn.ReadRecords(ctx, src.conn, topic, p, srcOffset, srcOffset+1, 1, true, w.e.cfg.SourceOpts...)
	if err != nil {
		return retryable("continue %s/%d: read source record %d: %v", topic, p, srcOffset, err)
	}
	if len(got) != 1 || got[0].Offset != dstOffset || len(want) != 1 || want[0].Offset != srcOffset {
		return permanent("continue %s/%d: the last mirrored records (destination offset %d, source offset %d) cannot both be read "+
			"(compacted or removed by retention), so the overlap cannot be proven; add the topic with recreate",
			topic, p, dstOffset, srcOffset)
	}
	if err := kafkaconn.SameRecord(want[0], got[0]); err != nil {
		return permanent("continue %s/%d: destination offset %d and source offset %d, the last records the old mirror copied, "+
			"differ (%v): the destination is not the source's history; add the topic with recreate", topic, p, dstOffset, srcOffset, err)
	}
	return nil
}
