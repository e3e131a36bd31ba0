package partition

import (
	"context"
	"sync"
	"time"

	"kmirror/repo"
	"kmirror/workers/lease"
)

// Lag in time (design.md, "Lag") is the age of the oldest source record not
// yet on the destination: now − the timestamp of the first committed data
// record at or after the checkpoint's src_next. The row stores that
// timestamp with the src_next it was read for (repo.OldestUncopied), and
// the age is computed when read (repo.LagMsSQL), so it grows with the
// database's clock while nothing writes.
//
// Two writers keep it:
//   - a mirroring session, from the batches it has fetched and not yet seen
//     acknowledged: the first one's first timestamp, handed over with its
//     checkpoint at no cost (worker's mirroring session);
//   - the offsets refresh (here), for the held partitions that are not
//     mirroring (paused, failed, preparing): for a partition behind its
//     source end, the record at src_next is read once, grouped with the
//     mirror's other reads of the moment (record_reads.go), and not again
//     while src_next stays where it is: a paused partition's timestamp
//     never changes, however far the source end moves.

// oldestReadTimeout bounds one refresh's reads of oldest uncopied records:
// the refresh's next round waits for them.
const oldestReadTimeout = 10 * time.Second

// oldestRetryAfter is how long a partition whose read failed waits before
// it is read again: a record that retention removed before it was mirrored
// fails every read (its lag in time stays unknown, its lost records are
// counted when the partition next aligns), and should not cost one each
// refresh.
const oldestRetryAfter = 30 * time.Second

// oldestCache is what the refresh last stored of each held partition that
// is not mirroring.
type oldestCache map[lease.Key]oldestEntry

type oldestEntry struct {
	epoch int64
	// src is the src_next it was read for; end the source end below which
	// it was read.
	src, end int64
	// none: no data record lay in [src, end) (markers, aborted records),
	// which holds only until the end moves. caughtUp: src was at the end.
	none, caughtUp bool
	// retryAt, when set, is when a failed read of src may be tried again.
	retryAt time.Time
}

// settled says whether the entry still answers for a partition at epoch
// whose checkpoint is src (-1: not known here) and source end end.
func (en oldestEntry) settled(epoch, src, end int64, now time.Time) bool {
	switch {
	case en.epoch != epoch || (src >= 0 && en.src != src):
		return false
	case !en.retryAt.IsZero():
		return now.Before(en.retryAt)
	case en.none || en.caughtUp:
		return en.end == end
	}
	return true
}

// forget drops the entries of partitions no longer held, and of those now
// mirroring, whose sessions keep their own.
func (c oldestCache) forget(running []lease.Key, states []workerState) {
	if len(c) == 0 {
		return
	}
	held := make(map[lease.Key]bool, len(running))
	for i, k := range running {
		held[k] = !states[i].mirroring
	}
	for k := range c {
		if !held[k] {
			delete(c, k)
		}
	}
}

// unknown returns the ends of the partitions, not mirroring and not already
// in changed, whose oldest uncopied record may have to be read: never
// looked at under this lease, or last found caught up or with no data
// record below an end that has moved since.
func (c oldestCache) unknown(ends, changed []repo.EndOffsets, workers []workerState) []repo.EndOffsets {
	now := time.Now()
	var in map[repo.PartitionID]bool
	var out []repo.EndOffsets
	for i, o := range ends {
		if workers[i].mirroring || o.SourceEnd < 0 {
			continue
		}
		if en, ok := c[keyOf(o.ID)]; ok && en.settled(o.Epoch, -1, o.SourceEnd, now) {
			continue
		}
		if in == nil {
			in = make(map[repo.PartitionID]bool, len(changed))
			for _, ch := range changed {
				in[ch.ID] = true
			}
		}
		if !in[o.ID] {
			out = append(out, o)
		}
	}
	return out
}

// oldestRead is one partition's read of its oldest uncopied record.
type oldestRead struct {
	end repo.EndOffsets
	src int64
	at  *time.Time
	ok  bool
}

// refreshOldest reads and stores the oldest uncopied record of the listed
// partitions that are behind their source end and not mirroring, where
// what the cache holds is not for their src_next (stored: each stored
// partition's src_next).
func (e *Engine) refreshOldest(ctx context.Context, c oldestCache, ends []repo.EndOffsets, stored map[repo.PartitionID]int64) {
	workers := e.workersOf(keysOfEnds(ends))
	now := time.Now()
	byMirror := map[string][]*oldestRead{}
	for i, o := range ends {
		next, ok := stored[o.ID]
		if !ok || next < 0 || o.SourceEnd < 0 || workers[i].mirroring {
			continue
		}
		k := keyOf(o.ID)
		if o.SourceEnd <= next {
			c[k] = oldestEntry{epoch: o.Epoch, src: next, end: o.SourceEnd, caughtUp: true}
			continue
		}
		if en, ok := c[k]; ok && en.settled(o.Epoch, next, o.SourceEnd, now) {
			continue
		}
		byMirror[o.ID.Mirror] = append(byMirror[o.ID.Mirror], &oldestRead{end: o, src: next})
	}
	if len(byMirror) == 0 {
		return
	}
	readCtx, cancel := context.WithTimeout(ctx, oldestReadTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for mirror, reads := range byMirror {
		src, err := e.source(readCtx, mirror)
		if err != nil {
			continue
		}
		// One goroutine per read, so that the mirror's reads of the moment
		// go together on one client (recordReads).
		for _, r := range reads {
			wg.Go(func() {
				recs, err := src.Records(readCtx, r.end.ID.Topic, r.end.ID.Partition, r.src, r.end.SourceEnd, 1)
				if err != nil {
					e.log.Debug("reading the oldest uncopied record failed", "mirror", mirror,
						"topic", r.end.ID.Topic, "partition", r.end.ID.Partition, "offset", r.src, "err", err)
					return
				}
				r.ok = true
				if len(recs) > 0 {
					at := recs[0].Timestamp
					r.at = &at
				}
			})
		}
	}
	wg.Wait()
	var writes []repo.EndOffsets
	var done []*oldestRead
	for _, reads := range byMirror {
		for _, r := range reads {
			if !r.ok {
				c[keyOf(r.end.ID)] = oldestEntry{epoch: r.end.Epoch, src: r.src, end: r.end.SourceEnd,
					retryAt: time.Now().Add(oldestRetryAfter)}
				continue
			}
			writes = append(writes, repo.EndOffsets{ID: r.end.ID, Epoch: r.end.Epoch, SourceEnd: -1, DestinationEnd: -1,
				Oldest: &repo.OldestUncopied{Src: r.src, At: r.at}})
			done = append(done, r)
		}
	}
	if len(writes) == 0 {
		return
	}
	// Its own bound: the reads may have used up theirs.
	writeCtx, cancelWrite := context.WithTimeout(ctx, checkpointSaveTimeout)
	defer cancelWrite()
	written, err := repo.PartitionsSetEndsNext(writeCtx, e.cfg.Pool, e.cfg.InstanceID, writes)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("saving oldest uncopied records failed", "err", err)
		}
		return
	}
	for _, r := range done {
		// Stored only where the checkpoint is still the one it was read
		// for; otherwise the next round reads again.
		if next, ok := written[r.end.ID]; ok && next == r.src {
			c[keyOf(r.end.ID)] = oldestEntry{epoch: r.end.Epoch, src: r.src, end: r.end.SourceEnd, none: r.at == nil}
		}
	}
}
