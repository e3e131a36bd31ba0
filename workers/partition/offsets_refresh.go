package partition

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"kmirror/repo"
	"kmirror/workers/lease"
)

// offsetsFullEvery is how many refreshes go by between two that send every
// partition's end offsets, not only the ones that changed since the last
// save: a checkpoint can write an older source end over a newer one, and
// only a full refresh puts that right.
const offsetsFullEvery = 15

// refreshOffsetsLoop keeps source and destination end offsets of every
// partition this instance holds fresh, so lag stays true while a partition
// is paused, failed or idle. Only the ends that changed since they were
// last saved go to the database (and every offsetsFullEvery-th refresh all
// of them): at 10,000 idle partitions each refresh would otherwise send
// all 10,000 to be compared.
func (e *Engine) refreshOffsetsLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.OffsetsInterval)
	defer t.Stop()
	saved := map[lease.Key]repo.EndOffsets{}
	oldest := oldestCache{}
	for round := 1; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		full := round%offsetsFullEvery == 0
		running := e.Running()
		states := e.workersOf(running)
		byMirror := map[string][]lease.Key{}
		for i, k := range running {
			// A mirroring session publishes its source end from its
			// fetches (each batch's last stable offset) and the
			// destination end with its checkpoints, so listing its
			// partitions every round would re-send the same ends, a
			// cost that grows with every idle partition.
			// The full round still lists them, to put right a
			// checkpoint that wrote an older end over a newer one, and
			// a partition is listed until one of its ends under the
			// current lease is stored: a session that fetches nothing
			// (an empty partition) publishes no end, and its lag would
			// stay unknown until the full round.
			if old, ok := saved[k]; ok && old.Epoch == states[i].epoch && states[i].mirroring && !full {
				continue
			}
			byMirror[k.Mirror] = append(byMirror[k.Mirror], k)
		}
		forgetReleased(saved, running)
		oldest.forget(running, states)
		var ends []repo.EndOffsets
		for mirror, keys := range byMirror {
			ends = append(ends, e.listEnds(ctx, mirror, keys)...)
		}
		changed := changedEnds(saved, ends, full)
		// Partitions whose oldest uncopied record must be looked at go too,
		// changed or not: the statement returns their src_next, and an
		// unchanged row costs it a lookup, not a write.
		changed = append(changed, oldest.unknown(ends, changed, e.workersOf(keysOfEnds(ends)))...)
		if len(changed) == 0 {
			continue
		}
		stored, err := repo.PartitionsSetEndsNext(ctx, e.cfg.Pool, e.cfg.InstanceID, changed)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("saving end offsets failed", "err", err)
			}
			continue
		}
		// A row that was busy, or whose lease moved on, is sent again.
		for _, o := range changed {
			if _, ok := stored[o.ID]; ok {
				saved[keyOf(o.ID)] = o
			}
		}
		e.refreshOldest(ctx, oldest, ends, stored)
	}
}

// keysOfEnds returns the keys of ends, in order.
func keysOfEnds(ends []repo.EndOffsets) []lease.Key {
	out := make([]lease.Key, len(ends))
	for i, o := range ends {
		out[i] = keyOf(o.ID)
	}
	return out
}

// changedEnds returns the ends that differ from the saved ones (all of
// them when full). An unknown end (-1) is no change: it is not written
// either way.
func changedEnds(saved map[lease.Key]repo.EndOffsets, ends []repo.EndOffsets, full bool) []repo.EndOffsets {
	var out []repo.EndOffsets
	for _, o := range ends {
		old, ok := saved[keyOf(o.ID)]
		if full || !ok || old.Epoch != o.Epoch ||
			(o.SourceEnd >= 0 && o.SourceEnd != old.SourceEnd) ||
			(o.DestinationEnd >= 0 && o.DestinationEnd != old.DestinationEnd) {
			out = append(out, o)
		}
	}
	return out
}

// forgetReleased drops the saved ends of partitions no longer held, so a
// later lease of one is sent in full.
func forgetReleased(saved map[lease.Key]repo.EndOffsets, running []lease.Key) {
	if len(saved) == 0 {
		return
	}
	held := make(map[lease.Key]bool, len(running))
	for _, k := range running {
		held[k] = true
	}
	for k := range saved {
		if !held[k] {
			delete(saved, k)
		}
	}
}

func keyOf(id repo.PartitionID) lease.Key {
	return lease.Key{Mirror: id.Mirror, Topic: id.Topic, Partition: id.Partition}
}

// listEnds asks both clusters for the end offsets of a mirror's partitions,
// each cluster by the topics' names there.
func (e *Engine) listEnds(ctx context.Context, mirror string, keys []lease.Key) []repo.EndOffsets {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.OffsetsInterval)
	defer cancel()
	// "" for a topic the desired-state cache no longer holds: its
	// destination end is not listed.
	dests := e.desired.destTopics(keys)
	topics := distinct(keys, func(k lease.Key) string { return k.Topic })
	src, err := e.source(ctx, mirror)
	if err != nil {
		return nil
	}
	// Only partitions that are not mirroring need the destination's end
	// (below), and on most rounds only those are listed at all.
	needDst := slices.ContainsFunc(e.workersOf(keys), func(w workerState) bool { return !w.mirroring })
	srcEnds, srcErr := src.Admin.ListCommittedOffsets(ctx, topics...)
	var dstEnds kadm.ListedOffsets
	dstErr := errSkipped
	if dstTopics := distinct(dests, func(d string) string { return d }); needDst && len(dstTopics) > 0 {
		dstEnds, dstErr = e.dstAdmin.ListEndOffsets(ctx, dstTopics...)
	}
	// Read after the listing: a partition that began mirroring meanwhile
	// must not get a destination end written (below).
	workers := e.workersOf(keys)
	out := make([]repo.EndOffsets, 0, len(keys))
	for i, k := range keys {
		se, de := int64(-1), int64(-1)
		if srcErr == nil {
			se = lookupOffset(srcEnds, k.Topic, k.Partition)
		}
		epoch, mirroring := workers[i].epoch, workers[i].mirroring
		// While mirroring, the session's checkpoints carry the destination
		// end that goes with their src_next, so that a describe row's lag
		// and offsets agree: a newer end from here would show a caught-up
		// partition with lag 1.
		if dstErr == nil && !mirroring && dests[i] != "" {
			de = lookupOffset(dstEnds, dests[i], k.Partition)
		}
		out = append(out, repo.EndOffsets{ID: repo.PartitionID{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition},
			Epoch: epoch, SourceEnd: se, DestinationEnd: de})
	}
	return out
}

// errSkipped stands for a listing that was not needed.
var errSkipped = errors.New("not listed")

func lookupOffset(l kadm.ListedOffsets, topic string, partition int32) int64 {
	if o, ok := l.Lookup(topic, partition); ok && o.Err == nil {
		return o.Offset
	}
	return -1
}

// distinct returns the distinct non-empty names of(x) of xs.
func distinct[T any](xs []T, of func(T) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if n := of(x); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// workerState is a running partition's lease epoch (0 if none) and
// whether it is copying records now.
type workerState struct {
	epoch     int64
	mirroring bool
}

// workersOf returns the state of each key's worker, under one lock (at
// 10,000 partitions, a lock per key would be a sixth of the loop's CPU).
func (e *Engine) workersOf(keys []lease.Key) []workerState {
	out := make([]workerState, len(keys))
	mirroring := e.watch.mirroring(keys)
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, k := range keys {
		if w := e.workers[k]; w != nil {
			out[i] = workerState{epoch: w.epoch, mirroring: mirroring[i]}
		}
	}
	return out
}
