package partition

import (
	"context"
	"sync"
	"time"

	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/runtime/throttle"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
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
	mu sync.Mutex
	// limits are the mirrors' throttle limits in bytes a second (0: none).
	limits map[string]int64
	// recompress is the codec of each mirror that recompresses
	// (mirror.compression.type other than source), parsed once here
	// rather than for every batch.
	recompress map[string]recordbatch.Codec
	total      map[string]int // the mirror's partitions to mirror
	held       map[string]int // of them, those copying here
	throttles  map[string]*throttle.Throttle
}

func newCopySettings() *copySettings {
	return &copySettings{limits: map[string]int64{}, recompress: map[string]recordbatch.Codec{},
		total: map[string]int{}, held: map[string]int{}, throttles: map[string]*throttle.Throttle{}}
}

// recompression returns the codec the mirror's batches are to be stored
// with, if it is not each batch's own.
func (c *copySettings) recompression(mirror string) (recordbatch.Codec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	codec, ok := c.recompress[mirror]
	return codec, ok
}

// store takes every mirror's copy config and moves each throttle to its
// share of its mirror's limit.
func (c *copySettings) store(configs map[string]repo.MirrorCopyConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.limits)
	clear(c.recompress)
	clear(c.total)
	for m, cfg := range configs {
		s := service.CopySettingsOf(cfg.Config)
		c.limits[m], c.total[m] = s.ThrottledRate, cfg.Partitions
		if codec, ok := recordbatch.ParseCodec(s.Compression); ok {
			c.recompress[m] = codec
		}
	}
	// Every mirror copying here, not only those with a throttle already:
	// a PATCH may set a limit on a mirror whose partitions are copying.
	// (A mirror has a throttle only while it copies here: pace drops it.)
	for m := range c.held {
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
	limit := c.limits[mirror]
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

// wait paces the mirror's copies by its throttle, each partition a flow of
// its own, so that the partitions share it evenly however the source's
// brokers lead them; size, the bytes of the copy, is counted only when the
// mirror has one.
func (c *copySettings) wait(ctx context.Context, done <-chan struct{}, k lease.Key, size func() int64) (time.Duration, error) {
	c.mu.Lock()
	t := c.throttles[k.Mirror]
	c.mu.Unlock()
	if t == nil {
		return 0, nil
	}
	n := size()
	if n == 0 {
		return 0, nil // nothing to copy: a delivery of ends only
	}
	return t.WaitFlow(ctx, done, k, n)
}
