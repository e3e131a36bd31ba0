package partition

import (
	"context"
	"sync"
	"time"

	"kmirror/internal/runtime/throttle"
	"kmirror/repo"
	"kmirror/service"
)

// copySettings caches each mirror's copy settings (mirror.compression.type,
// mirror.replication.throttled.rate) and holds each mirror's throttle,
// shared by the mirror's partitions on this instance. The desired-state
// cache refreshes it, so a PATCH reaches the copies as a desire change
// does.
//
// A mirror's limit is for the mirror as a whole. Each instance paces the
// partitions it copies at its share of it: the limit times the partitions
// it copies over the mirror's partitions to mirror. With the partitions
// shared evenly and equally busy, the instances' rates add up to the
// limit; an instance whose partitions are quiet leaves its share unused.
type copySettings struct {
	mu        sync.Mutex
	settings  map[string]service.CopySettings
	total     map[string]int // the mirror's partitions to mirror
	held      map[string]int // of them, those copying here
	throttles map[string]*throttle.Throttle
}

func newCopySettings() *copySettings {
	return &copySettings{settings: map[string]service.CopySettings{}, total: map[string]int{},
		held: map[string]int{}, throttles: map[string]*throttle.Throttle{}}
}

// get returns a mirror's settings; a mirror not loaded yet has the
// defaults.
func (c *copySettings) get(mirror string) service.CopySettings {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.settings[mirror]; ok {
		return s
	}
	return service.CopySettingsOf(nil)
}

// store takes every mirror's copy config and moves each throttle to its
// share of its mirror's limit.
func (c *copySettings) store(configs map[string]repo.MirrorCopyConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.settings)
	clear(c.total)
	for m, cfg := range configs {
		c.settings[m] = service.CopySettingsOf(cfg.Config)
		c.total[m] = cfg.Partitions
	}
	for m := range c.throttles {
		c.pace(m)
	}
}

// copying counts a partition of the mirror in or (by -1) out of this
// instance's share.
func (c *copySettings) copying(mirror string, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[mirror] += delta
	if c.held[mirror] <= 0 {
		delete(c.held, mirror)
	}
	c.pace(mirror)
}

// pace sets the mirror's throttle to this instance's share of its limit,
// making the throttle when there is a limit.
func (c *copySettings) pace(mirror string) {
	limit := c.settings[mirror].ThrottledRate
	t := c.throttles[mirror]
	if limit == 0 || c.held[mirror] == 0 {
		if t != nil {
			t.SetRate(0)
			delete(c.throttles, mirror)
		}
		return
	}
	share := limit
	if total := c.total[mirror]; total > c.held[mirror] {
		share = max(limit*int64(c.held[mirror])/int64(total), 1)
	}
	if t == nil {
		c.throttles[mirror] = throttle.New(share)
		return
	}
	t.SetRate(share)
}

// wait paces n bytes of the mirror's copies by its throttle.
func (c *copySettings) wait(ctx context.Context, done <-chan struct{}, mirror string, n int64) (time.Duration, error) {
	c.mu.Lock()
	t := c.throttles[mirror]
	c.mu.Unlock()
	if t == nil {
		return 0, nil
	}
	return t.Wait(ctx, done, n)
}
