package partition

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kmirror/internal/kafka/leaders"
)

// partitionTroubles are runs of failures that concern single partitions of
// a mirror's fetches, which the fetcher retries: a fetch request that asked
// for the partition and failed, or an answer for it that could not be used.
// A client's trouble (clientHealth) concerns every partition it fetches;
// these only theirs. A delivery of the partition's batches ends its run.
//
// The mirror's fetcher feeds it through fetchers.noteTrouble; the
// mirroring sessions read it with the clients' health (Fetch.Trouble), and
// the engine's client watch wakes them when the set of partitions in
// trouble changes.
type partitionTroubles struct {
	now func() time.Time
	// n is len(runs), read without the lock on every delivery.
	n    atomic.Int64
	mu   sync.Mutex
	runs map[troubleRef]*failureRun
}

// troubleRef names a partition of a mirror's source.
type troubleRef struct {
	mirror string
	tp     leaders.TopicPartition
}

func newPartitionTroubles() *partitionTroubles {
	return &partitionTroubles{now: time.Now, runs: map[troubleRef]*failureRun{}}
}

// failed records a failure of the partition that will be retried.
func (t *partitionTroubles) failed(ref troubleRef, err error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[ref]
	if r == nil {
		r = &failureRun{since: now}
		t.runs[ref] = r
		t.n.Store(int64(len(t.runs)))
	}
	r.last, r.err = now, err
}

// answered ends the partition's run: its batches were delivered.
func (t *partitionTroubles) answered(ref troubleRef) {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, ref)
	t.n.Store(int64(len(t.runs)))
}

// forget drops the partition's run: it is no longer fetched here.
func (t *partitionTroubles) forget(ref troubleRef) { t.answered(ref) }

// trouble is the partition's run, once it has lasted d.
func (t *partitionTroubles) trouble(ref troubleRef, d time.Duration) (time.Time, error) {
	if t.n.Load() == 0 {
		return time.Time{}, nil
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[ref]
	if r == nil || now.Sub(r.since) < d {
		return time.Time{}, nil
	}
	if now.Sub(r.last) > failureRunExpiry {
		delete(t.runs, ref)
		t.n.Store(int64(len(t.runs)))
		return time.Time{}, nil
	}
	return r.since, r.err
}

// signature names the partitions whose runs have lasted d, and since when,
// for the client watch to tell a change.
func (t *partitionTroubles) signature(d time.Duration) string {
	if t.n.Load() == 0 {
		return ""
	}
	now := t.now()
	t.mu.Lock()
	var out []string
	for ref, r := range t.runs {
		if now.Sub(r.since) >= d && now.Sub(r.last) <= failureRunExpiry {
			out = append(out, fmt.Sprintf("%s/%s/%d@%d", ref.mirror, ref.tp.Topic, ref.tp.Partition, r.since.UnixNano()))
		}
	}
	t.mu.Unlock()
	slices.Sort(out)
	return strings.Join(out, ",")
}
