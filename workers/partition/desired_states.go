package partition

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/notifier"
	"kmirror/repo"
	"kmirror/workers/lease"
	"kmirror/workers/partition/metrics"
	"kmirror/workers/partition/worker"
)

// desiredStates caches every mirror topic's desired state and recreate flag,
// re-read in one query when the notifier says they changed (or every
// interval, the fallback), so workers never query it themselves.
type desiredStates struct {
	pool *pgxpool.Pool
	// metrics, when set, loses the series of mirrors that are gone.
	metrics *metrics.Metrics
	// copy, when set, is refreshed with the mirrors' copy configs.
	copy *copySettings

	mu     sync.RWMutex
	topics map[[2]string]worker.Desire
	// changed is closed and replaced on every refresh.
	changed chan struct{}
}

func newDesiredStates(pool *pgxpool.Pool) *desiredStates {
	return &desiredStates{pool: pool, changed: make(chan struct{})}
}

// withMetrics makes each refresh delete the series of mirrors that are
// gone, in every instance, not only in the one whose API deleted them.
func (d *desiredStates) withMetrics(m *metrics.Metrics) *desiredStates {
	d.metrics = m
	return d
}

// withCopySettings makes each refresh read the mirrors' copy configs too.
func (d *desiredStates) withCopySettings(c *copySettings) *desiredStates {
	d.copy = c
	return d
}

// get returns a topic's desire; ok is false for a topic that no longer exists.
func (d *desiredStates) Desire(mirror, topic string) (worker.Desire, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	t, ok := d.topics[[2]string{mirror, topic}]
	return t, ok
}

// destTopics returns the destination topic of each key's topic, "" for a
// topic the cache does not hold (its mirror or row is gone), under one
// lock.
func (d *desiredStates) destTopics(keys []lease.Key) []string {
	out := make([]string, len(keys))
	d.mu.RLock()
	defer d.mu.RUnlock()
	for i, k := range keys {
		out[i] = d.topics[[2]string{k.Mirror, k.Topic}].DestTopic
	}
	return out
}

// updated returns a channel closed at the next refresh.
func (d *desiredStates) Changed() <-chan struct{} {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.changed
}

func (d *desiredStates) run(ctx context.Context, every time.Duration, changed *notifier.Subscription) {
	notifier.Loop(ctx, every, changed, func(ctx context.Context) { _ = d.Refresh(ctx) })
}

func (d *desiredStates) Refresh(ctx context.Context) error {
	readAt := time.Now()
	rows, err := repo.TopicsListDesired(ctx, d.pool)
	if err != nil {
		return err
	}
	m := make(map[[2]string]worker.Desire, len(rows))
	present := map[string]bool{}
	for _, r := range rows {
		m[[2]string{r.Mirror, r.Topic}] = worker.Desire{DestTopic: r.DestTopic, State: r.DesiredState,
			ReplicationFactor: r.ReplicationFactor, Recreate: r.Recreate, ContinueHistory: r.ContinueHistory,
			KeepDivergent: r.KeepDivergent}
		present[r.Mirror] = true
	}
	if d.copy != nil {
		cfgs, err := repo.MirrorsListCopyConfigs(ctx, d.pool)
		if err != nil {
			return err
		}
		d.copy.store(cfgs)
	}
	d.store(m)
	d.metrics.ForgetMirrorsExcept(present, readAt)
	return nil
}

// store makes m the desired states and wakes the waiters if they changed.
func (d *desiredStates) store(m map[[2]string]worker.Desire) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Waiters are woken only by a change: woken by the fallback poll every
	// 5 s, every worker of the instance (200 wake-ups a second at 1,000
	// partitions) would find nothing new.
	if !maps.Equal(d.topics, m) {
		d.topics = m
		close(d.changed)
		d.changed = make(chan struct{})
	}
}
