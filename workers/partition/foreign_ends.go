package partition

import (
	"context"
	"sync"
	"time"

	"kmirror/repo"
)

// Source ends of partitions that other instances lease.
//
// Only a partition's owner lists its source end (its session's fetches
// through the checkpointer, offsets_refresh.go for the rest). An owner that
// dies keeps its leases until their TTL, and it cannot be known dead sooner:
// it renews only every few seconds. Meanwhile its partitions' lag would stay
// frozen while records go uncopied. So every instance also lists the ends
// of partitions it does not hold whose stored end has not changed for
// foreignStaleAfter, and writes the ones that moved on. Whether an owner is
// alive does not enter into it:
//   - a live owner of a busy partition writes its end more often than that,
//     so the partition is not listed;
//   - an idle partition's end does not move, so nothing is written;
//   - a dead owner's busy partitions are written by the others, within
//     foreignStaleAfter + foreignEndsEvery of its last write.
//
// At the server's defaults (ends listed every 2 s, checkpoints every 1 s)
// that is 3 s + 1 s, within the 5 s an owner's death must show in lag.

// foreignStaleAfter is how long a stored source end may go unchanged before
// the other instances list it: longer than its owner takes between two
// writes of a moving end (a checkpoint while mirroring, an offsets refresh
// otherwise).
func (e *Engine) foreignStaleAfter() time.Duration {
	return e.cfg.OffsetsInterval + e.cfg.CheckpointInterval
}

// foreignEndsEvery is how often the stale ends are looked for.
func (e *Engine) foreignEndsEvery() time.Duration { return e.cfg.OffsetsInterval / 2 }

// refreshForeignEndsLoop writes the source ends of other instances'
// partitions whose owner stopped writing them.
func (e *Engine) refreshForeignEndsLoop(ctx context.Context) {
	t := time.NewTicker(e.foreignEndsEvery())
	defer t.Stop()
	quiet := map[repo.PartitionID]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.refreshForeignEnds(ctx, quiet)
	}
}

// foreignQuietFor is how long a stale end found unchanged at the source is
// not listed again: an idle partition's end stays stale for good, and
// listing every idle partition of every other instance each second would
// cost each instance a listing of most of the deployment's partitions.
const foreignQuietFor = 10 * time.Second

// refreshForeignEnds runs one pass: one statement finds the stale ends
// (none, reading no partition row, when this instance holds everything),
// one listing per mirror asks the source, and one statement writes the
// ends that moved.
func (e *Engine) refreshForeignEnds(ctx context.Context, quiet map[repo.PartitionID]time.Time) {
	staleAfter := e.foreignStaleAfter()
	stale, err := repo.PartitionsListStaleForeignEnds(ctx, e.cfg.Pool, e.cfg.InstanceID, staleAfter)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Debug("listing other instances' stale source ends failed", "err", err)
		}
		return
	}
	now := time.Now()
	listed := make(map[repo.PartitionID]bool, len(stale))
	byMirror := map[string][]repo.StaleEnd{}
	for _, s := range stale {
		listed[s.ID] = true
		if now.Before(quiet[s.ID]) {
			continue
		}
		byMirror[s.ID.Mirror] = append(byMirror[s.ID.Mirror], s)
	}
	for id := range quiet {
		if !listed[id] {
			delete(quiet, id) // written again by its owner, or gone
		}
	}
	if len(byMirror) == 0 {
		return
	}
	// One mirror's unreachable source must not hold up the others'.
	var mu sync.Mutex
	var moved []repo.StaleEnd
	var wg sync.WaitGroup
	for mirror, parts := range byMirror {
		wg.Go(func() {
			m := e.listMoved(ctx, mirror, parts)
			mu.Lock()
			moved = append(moved, m...)
			mu.Unlock()
		})
	}
	wg.Wait()
	movedIDs := make(map[repo.PartitionID]bool, len(moved))
	for _, m := range moved {
		movedIDs[m.ID] = true
	}
	for _, parts := range byMirror {
		for _, p := range parts {
			if !movedIDs[p.ID] {
				quiet[p.ID] = now.Add(foreignQuietFor)
			}
		}
	}
	if len(moved) == 0 {
		return
	}
	n, err := repo.PartitionsSetForeignEnds(ctx, e.cfg.Pool, e.cfg.InstanceID, staleAfter, moved)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("saving other instances' source ends failed", "err", err)
		}
		return
	}
	if n > 0 {
		e.log.Debug("refreshed source ends that their owners stopped writing", "partitions", n)
	}
}

// listMoved lists the source ends of one mirror's stale partitions and
// returns those above the stored end.
func (e *Engine) listMoved(ctx context.Context, mirror string, parts []repo.StaleEnd) []repo.StaleEnd {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.OffsetsInterval)
	defer cancel()
	src, err := e.source(ctx, mirror)
	if err != nil {
		return nil // a mirror being deleted, or missing its credentials
	}
	topicSet := map[string]bool{}
	for _, p := range parts {
		topicSet[p.ID.Topic] = true
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	// The committed end, as the owner's fetches (read_committed) and
	// offsets refresh store it.
	listed, err := src.Admin.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		e.log.Debug("listing source ends failed", "mirror", mirror, "err", err)
		return nil
	}
	var out []repo.StaleEnd
	for _, p := range parts {
		o, ok := listed.Lookup(p.ID.Topic, p.ID.Partition)
		if ok && o.Err == nil && o.Offset > p.SourceEnd {
			out = append(out, repo.StaleEnd{ID: p.ID, SourceEnd: o.Offset})
		}
	}
	return out
}
