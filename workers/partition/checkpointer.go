package partition

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"kmirror/internal/runtime/startstop"
	"kmirror/repo"
	"kmirror/workers/lease"
)

// checkpointer saves the checkpoints of every partition of this instance
// that changed, about once a second, in one fenced statement; workers only
// update memory on the hot path.
// checkpointSaveTimeout bounds one save of checkpoints; stopSaveTimeout one
// during a shutdown, within its budget.
const (
	checkpointSaveTimeout = 5 * time.Second
	stopSaveTimeout       = time.Second
)

type checkpointer struct {
	pool  *pgxpool.Pool
	owner string
	log   *slog.Logger
	// saveDuration observes each flush's save; nil observes nothing.
	saveDuration prometheus.Observer
	// budget bounds saves by what is left of a shutdown (nil: 5 s each);
	// stopFailed is set when a save failed during a shutdown: the database
	// does not answer, and the saves after it are not tried.
	budget     *startstop.Budget
	stopFailed atomic.Bool

	// saveMu runs saves one at a time, in the order their checkpoints were
	// taken: a partition's checkpoint saved by Save must not commit
	// while an earlier batch still carries the offset-map runs below it.
	// That batch would otherwise commit later, or be fenced after a
	// hand-back and dropped, leaving a hole in the offset map.
	saveMu sync.Mutex

	mu    sync.Mutex
	dirty map[lease.Key]*repo.Checkpoint

	// soon asks for a save ahead of the interval (see CaughtUp).
	soon chan struct{}

	// saves groups the partitions' own saves (Save): at a graceful stop
	// every worker saves its last checkpoint at once, and the leases are
	// handed back only when all have, so one statement each, one at a
	// time, would hold up the hand-back of thousands of partitions.
	saves *grouped[lease.Key, struct{}]
}

func newCheckpointer(pool *pgxpool.Pool, owner string, log *slog.Logger) *checkpointer {
	c := &checkpointer{pool: pool, owner: owner, log: log, dirty: map[lease.Key]*repo.Checkpoint{},
		soon: make(chan struct{}, 1)}
	c.saves = newGrouped("checkpoint saves", groupMax, groupLinger, log, c.saveNow)
	return c
}

// CaughtUp asks for the pending checkpoints to be saved within
// catchUpDelay instead of at the next interval: a partition that was
// copying a backlog has just reached the source's end, and describe should
// say lag 0 when it is so, not up to an interval later. Partitions that
// catch up together share the save; a trickle, whose records are copied as
// they come, never asks (see the mirroring session's publish).
func (c *checkpointer) CaughtUp() {
	select {
	case c.soon <- struct{}{}:
	default:
	}
}

// catchUpDelay gathers the partitions that catch up together (a backlog
// spread over a topic's partitions ends at about the same time) into one
// save.
const catchUpDelay = 10 * time.Millisecond

// catchUpShare bounds the time early saves take: after one, the next waits
// at least catchUpShare times as long as that one took, so they take at most
// a fifth of the time however many partitions catch up one after another.
// A fixed gap would hold back the lag 0 of a topic's partitions that catch
// up just after the first one's save, while a save of a few rows is quick.
const catchUpShare = 4

// catchUpWait is how long a catch-up waits before its save, given when the
// last early save started and how long it took.
func catchUpWait(now, lastStart time.Time, lastTook time.Duration) time.Duration {
	return max(catchUpDelay, lastStart.Add((catchUpShare+1)*lastTook).Sub(now))
}

// Update records a partition's latest progress and the offset-map runs that
// changed since its last update.
func (c *checkpointer) Update(k lease.Key, cp repo.Checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.dirty[k]; old != nil && old.Epoch == cp.Epoch {
		cp.Runs = mergeRuns(old.Runs, cp.Runs)
		cp.ResetRetries = cp.ResetRetries || old.ResetRetries
		if cp.SourceEnd < 0 {
			cp.SourceEnd = old.SourceEnd
		}
		if cp.DestinationEnd < 0 {
			cp.DestinationEnd = old.DestinationEnd
		}
		if cp.Oldest == nil && old.Oldest != nil && old.Oldest.Src == cp.SrcNext {
			cp.Oldest = old.Oldest
		}
	}
	c.dirty[k] = &cp
}

// mergeRuns keeps one entry per run start, the later one winning (a run
// grows while it is open).
func mergeRuns(old, upd []repo.OffsetRun) []repo.OffsetRun {
	out := append([]repo.OffsetRun(nil), old...)
	for _, r := range upd {
		replaced := false
		for i := range out {
			if out[i].SrcStart == r.SrcStart {
				out[i], replaced = r, true
			}
		}
		if !replaced {
			out = append(out, r)
		}
	}
	return out
}

// Drop forgets a partition's pending checkpoint: a lost lease's leftovers
// must not be saved later.
func (c *checkpointer) Drop(k lease.Key) { c.take(k) }

// take removes and returns a partition's pending checkpoint.
func (c *checkpointer) take(k lease.Key) *repo.Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := c.dirty[k]
	delete(c.dirty, k)
	return cp
}

func (c *checkpointer) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var lastStart time.Time
	var lastTook time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.flush(ctx)
		case <-c.soon:
			select {
			case <-ctx.Done():
				return
			case <-time.After(catchUpWait(time.Now(), lastStart, lastTook)):
			}
			lastStart = time.Now()
			c.flush(ctx)
			lastTook = time.Since(lastStart)
		}
	}
}

// errStopSaveSkipped is a save not tried during a shutdown after another
// failed.
var errStopSaveSkipped = errors.New("checkpoint save skipped: the database did not answer an earlier save of this shutdown")

// save saves checkpoints; during a shutdown, only until one save fails, so
// that a database that does not answer costs the shutdown one timeout, not
// one per partition (the saves are serialized).
func (c *checkpointer) save(ctx context.Context, cps []repo.Checkpoint) (map[repo.PartitionID]bool, error) {
	stopping := c.budget.Begun()
	if stopping && c.stopFailed.Load() {
		return nil, errStopSaveSkipped
	}
	saved, err := saveCheckpoints(ctx, c.pool, c.owner, cps)
	if err != nil && stopping {
		c.stopFailed.Store(true)
	}
	return saved, err
}

// flush saves every pending checkpoint; ones that fail to save for a
// transient reason are put back for the next round.
func (c *checkpointer) flush(ctx context.Context) {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	if len(c.dirty) == 0 {
		c.mu.Unlock()
		return
	}
	batch := c.dirty
	c.dirty = map[lease.Key]*repo.Checkpoint{}
	c.mu.Unlock()
	cps := make([]repo.Checkpoint, 0, len(batch))
	for _, cp := range batch {
		cps = append(cps, *cp)
	}
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.budget.Bound(checkpointSaveTimeout, stopSaveTimeout))
	defer cancel()
	start := time.Now()
	saved, err := c.save(saveCtx, cps)
	if c.saveDuration != nil {
		c.saveDuration.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		c.log.Warn("checkpoint save failed; retrying next round", "partitions", len(cps), "err", err)
		c.mu.Lock()
		for k, cp := range batch {
			if cur := c.dirty[k]; cur == nil {
				c.dirty[k] = cp
			} else if cur.Epoch == cp.Epoch {
				cur.Runs = mergeRuns(cp.Runs, cur.Runs)
			}
		}
		c.mu.Unlock()
		return
	}
	// A checkpoint the fence refused belongs to a lease that moved on; the
	// lease manager stops that worker on its next renewal.
	for k := range batch {
		if !saved[repo.PartitionID{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition}] {
			c.log.Info("checkpoint not saved: the lease moved on", "mirror", k.Mirror, "topic", k.Topic, "partition", k.Partition)
		}
	}
}

// Save saves one partition's pending checkpoint now, before a state change
// that must not run ahead of it.
func (c *checkpointer) Save(_ context.Context, k lease.Key) error {
	_, err := c.saves.do(k)
	return err
}

// saveNow saves the pending checkpoints of keys in one statement, for the
// partitions' own saves made together (Save); the results are aligned
// with keys.
func (c *checkpointer) saveNow(keys []lease.Key) ([]struct{}, []error) {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	errs := make([]error, len(keys))
	var cps []repo.Checkpoint
	taken := map[lease.Key]bool{}
	for _, k := range keys {
		if cp := c.take(k); cp != nil {
			cps = append(cps, *cp)
			taken[k] = true
		}
	}
	if len(cps) == 0 {
		return make([]struct{}, len(keys)), errs
	}
	saveCtx, cancel := context.WithTimeout(context.Background(), c.budget.Bound(checkpointSaveTimeout, stopSaveTimeout))
	defer cancel()
	saved, err := c.save(saveCtx, cps)
	for i, k := range keys {
		id := repo.PartitionID{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition}
		switch {
		case err != nil:
			errs[i] = err
		case taken[k] && !saved[id]:
			errs[i] = errCheckpointFenced
		}
	}
	if err != nil {
		for _, cp := range cps {
			c.Update(lease.Key{Mirror: cp.Mirror, Topic: cp.Topic, Partition: cp.Partition}, cp)
		}
	}
	return make([]struct{}, len(keys)), errs
}

var errCheckpointFenced = errors.New("checkpoint not saved: the lease moved on")

// saveCheckpoints saves checkpoints and their runs in one transaction.
func saveCheckpoints(ctx context.Context, pool *pgxpool.Pool, owner string, cps []repo.Checkpoint) (map[repo.PartitionID]bool, error) {
	var saved map[repo.PartitionID]bool
	err := repo.WithTx(ctx, pool, func(tx pgx.Tx) error {
		var err error
		saved, err = repo.CheckpointsSave(ctx, tx, owner, cps)
		return err
	})
	return saved, err
}
