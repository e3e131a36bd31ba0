package partition

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"kmirror/repo"
	"kmirror/workers/lease"
)

// refreshOffsetsLoop keeps source and destination end offsets of every
// partition this instance holds fresh, so lag stays true while a partition
// is paused, failed or idle.
func (e *Engine) refreshOffsetsLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.OffsetsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		byMirror := map[string][]lease.Key{}
		for _, k := range e.Running() {
			byMirror[k.Mirror] = append(byMirror[k.Mirror], k)
		}
		var ends []repo.EndOffsets
		for mirror, keys := range byMirror {
			ends = append(ends, e.listEnds(ctx, mirror, keys)...)
		}
		if len(ends) > 0 {
			if err := repo.PartitionsSetEnds(ctx, e.cfg.Pool, e.cfg.InstanceID, ends); err != nil && ctx.Err() == nil {
				e.log.Warn("saving end offsets failed", "err", err)
			}
		}
	}
}

// listEnds asks both clusters for the end offsets of a mirror's partitions.
func (e *Engine) listEnds(ctx context.Context, mirror string, keys []lease.Key) []repo.EndOffsets {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.OffsetsInterval)
	defer cancel()
	topicSet := map[string]bool{}
	for _, k := range keys {
		topicSet[k.Topic] = true
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	src, err := e.source(ctx, mirror)
	if err != nil {
		return nil
	}
	srcEnds, srcErr := src.admin.ListCommittedOffsets(ctx, topics...)
	dstEnds, dstErr := e.dstAdmin.ListEndOffsets(ctx, topics...)
	out := make([]repo.EndOffsets, 0, len(keys))
	for _, k := range keys {
		se, de := int64(-1), int64(-1)
		if srcErr == nil {
			se = lookupOffset(srcEnds, k)
		}
		epoch, mirroring := e.workerOf(k)
		// While mirroring, the session's checkpoints carry the destination
		// end that goes with their src_next, so that a describe row's lag
		// and offsets agree: a newer end from here would show a caught-up
		// partition with lag 1.
		if dstErr == nil && !mirroring {
			de = lookupOffset(dstEnds, k)
		}
		out = append(out, repo.EndOffsets{ID: repo.PartitionID{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition},
			Epoch: epoch, SourceEnd: se, DestinationEnd: de})
	}
	return out
}

func lookupOffset(l kadm.ListedOffsets, k lease.Key) int64 {
	if o, ok := l.Lookup(k.Topic, k.Partition); ok && o.Err == nil {
		return o.Offset
	}
	return -1
}

// workerOf returns the lease epoch of a running partition (0 if none) and
// whether it is copying records now.
func (e *Engine) workerOf(k lease.Key) (epoch int64, mirroring bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workers[k]; w != nil {
		return w.lease.Epoch, w.mirroring.Load()
	}
	return 0, false
}
