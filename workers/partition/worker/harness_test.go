package worker

// The harness that runs a Worker on the fakes, and the Slots fake and
// test leases it uses.
//
// A test sets the scene on the fakes (h.src.produce, h.dst.createTopic and
// h.mirrored, h.addRow or h.checkpointed, h.db.setDesire), runs the worker
// (h.start: go w.Run, stopped by the test's cleanup), and waits with a
// deadline, never a fixed sleep, for what it expects: h.db.waitRow and
// waitState wake at every write to the fake database, h.waitDestination at
// every append to the destination; h.cfg.BeforeStep (its channel, or a
// Hook that runs in the worker's goroutine) marks each step. Then it
// asserts the outcome (the row, h.dst's records: sameAsSource,
// copiesInOrder) and how it was reached (h.db.log: the transitions,
// realignments and notes written, in order). Faults are set on the fakes:
// h.src.sourceFault, h.dst.offsetsErr and stall, h.copy.failNext, hold and
// stuck, h.db.transitionFault, h.watch.interrupt and setLoss.

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/runtime/testsignal"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
)

// fakeSlots is Slots: a semaphore of n, counting acquisitions. With n = 1,
// a worker that waited for a second slot while holding one would hang.
type fakeSlots struct {
	ch       chan struct{}
	mu       sync.Mutex
	acquired int
}

func newFakeSlots(n int) *fakeSlots { return &fakeSlots{ch: make(chan struct{}, n)} }

func (s *fakeSlots) Acquire(ctx context.Context) (func(), error) {
	select {
	case s.ch <- struct{}{}:
	case <-ctx.Done():
		return func() {}, context.Cause(ctx)
	}
	s.mu.Lock()
	s.acquired++
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { <-s.ch }) }, nil
}

// ---------------------------------------------------------------------------
// Leases.

// ---------------------------------------------------------------------------
// The harness: one mirror "m", one source topic "t" mirrored to the
// destination topic "east.t", this instance "me" at lease epoch 7.

const (
	hMirror = "m"
	hTopic  = "t"
	hDest   = "east.t"
	hOwner  = "me"
	hEpoch  = 7
)

var srcID = []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

type harness struct {
	t       *testing.T
	db      *fakeDB
	src     *fakeSource
	dst     *fakeDestination
	copy    *fakeCopy
	watch   *fakeWatch
	prepare *fakeSlots
	pokes   chan struct{}
	cfg     Config
	// dest is the destination topic's name (hDest unless a test renames
	// it, with the desire's DestTopic).
	dest string
}

// newHarness sets up a source topic of partitions partitions (id 1) and
// the topic's desire to mirror it; no partition row, no destination topic.
func newHarness(t *testing.T, partitions int) *harness {
	db := newFakeDB(hOwner)
	dst := newFakeDestination()
	h := &harness{t: t, db: db, src: newFakeSource(hTopic, 1, partitions), dst: dst, copy: &fakeCopy{dst: dst},
		watch: newFakeWatch(), prepare: newFakeSlots(1), pokes: make(chan struct{}, 1), dest: hDest}
	db.setTopic(hMirror, hTopic, Desire{DestTopic: hDest, State: service.DesiredMirroring, ReplicationFactor: 1}, nil)
	steps := &testsignal.Signal[StepPoint]{}
	steps.Init()
	h.cfg = Config{
		Retry:           RetryPolicy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, MaxAttempts: 100},
		DeliveryTimeout: 5 * time.Second, SettledWaitMax: time.Second,
		Logger:     slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		BeforeStep: steps, Gate: batchproduce.NewGate(1 << 20), Codecs: &recordbatch.Codecs{},
	}
	return h
}

func pid(p int32) repo.PartitionID {
	return repo.PartitionID{Mirror: hMirror, Topic: hTopic, Partition: p}
}

func keyOf(p int32) lease.Key { return lease.Key{Mirror: hMirror, Topic: hTopic, Partition: p} }

// addRow adds partition p's row, leased to this instance at hEpoch; fn
// sets the rest.
func (h *harness) addRow(p int32, fn func(r *repo.Partition)) {
	r := repo.Partition{Mirror: hMirror, Topic: hTopic, Partition: p, LeaseOwner: hOwner, LeaseEpoch: hEpoch, HandedBackDst: -1}
	if fn != nil {
		fn(&r)
	}
	h.db.addPartition(r)
}

// mirrored fills the destination with copies of the source's records
// [from, to) at the same offsets (a destination this mirror wrote).
func (h *harness) mirrored(p int32, from, to int64) {
	for _, r := range h.src.records(p) {
		if r.Offset >= from && r.Offset < to {
			h.dst.append(h.dest, p, r)
		}
	}
}

func (h *harness) ports() Ports {
	return Ports{Desires: fakeDesires{h.db}, Prepare: h.prepare, TakeOver: newFakeSlots(1),
		Rows: fakeRows{h.db}, Topics: fakeTopics{h.db}, OffsetMap: fakeOffsetMap{h.db},
		Sources: fakeSources{h.src}, Destination: h.dst, Copy: h.copy, Watch: h.watch,
		Checkpoints: fakeCheckpoints{h.db}, Pokes: h.pokes}
}

type running struct {
	w *Worker
	// expired makes the lease untrusted, as its deadline passing does.
	expired atomic.Bool
	cancel  context.CancelFunc
	exited  chan struct{}
}

// run starts partition p's worker under a lease of (owner, epoch) taken
// over from previous; the test's cleanup stops it.
func (h *harness) run(p int32, owner string, epoch int64, previous string) *running {
	r := &running{exited: make(chan struct{})}
	l := Held{Key: keyOf(p), Owner: owner, Epoch: epoch, Previous: previous, Valid: func() bool { return !r.expired.Load() }}
	w := New(h.cfg, h.ports(), l)
	ctx, cancel := context.WithCancel(context.Background())
	r.w, r.cancel = w, cancel
	go func() {
		defer close(r.exited)
		w.Run(ctx)
	}()
	h.t.Cleanup(func() {
		r.w.Stop()
		cancel()
	})
	return r
}

// start runs partition p's worker as this instance at hEpoch.
func (h *harness) start(p int32) *running { return h.run(p, hOwner, hEpoch, "") }

// waitExited waits for the worker's Run to return by itself.
func (r *running) waitExited(t *testing.T) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(waitFor):
		t.Fatal("the worker did not end")
	}
}

// waitDestination waits until the destination partition holds n records.
func (h *harness) waitDestination(p int32, n int) []*kgo.Record {
	h.t.Helper()
	deadline := time.After(waitFor)
	for {
		h.dst.mu.Lock()
		ch := h.dst.changed
		h.dst.mu.Unlock()
		recs := h.dst.records(h.dest, p)
		if len(recs) == n {
			return recs
		}
		if len(recs) > n {
			h.t.Fatalf("destination %s/%d holds %d records; want %d", h.dest, p, len(recs), n)
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("destination %s/%d holds %d records after %s; want %d", h.dest, p, len(recs), waitFor, n)
		}
	}
}

// sameAsSource asserts that destination records [dstFrom, ...) are the
// source's from srcFrom on, one for one, at consecutive offsets.
func (h *harness) sameAsSource(p int32, dstFrom, srcFrom int64) {
	h.t.Helper()
	bySrc := map[int64]*kgo.Record{}
	for _, r := range h.src.records(p) {
		bySrc[r.Offset] = r
	}
	got := h.dst.records(h.dest, p)
	n := 0
	for _, g := range got {
		if g.Offset < dstFrom {
			continue
		}
		want := bySrc[srcFrom+g.Offset-dstFrom]
		if want == nil {
			h.t.Fatalf("destination offset %d has no source record at %d", g.Offset, srcFrom+g.Offset-dstFrom)
		}
		if err := kafkaconn.SameRecord(want, g); err != nil {
			h.t.Fatalf("destination offset %d is not source offset %d: %v", g.Offset, want.Offset, err)
		}
		n++
	}
	if n == 0 {
		h.t.Fatalf("no destination record from offset %d", dstFrom)
	}
}

// copiesInOrder asserts that the destination's records from dstFrom on
// are the source's committed records from srcFrom on, one for one, in
// order (markers and aborted records take source offsets, not
// destination ones).
func (h *harness) copiesInOrder(p int32, srcFrom, dstFrom int64) {
	h.t.Helper()
	var want, got []*kgo.Record
	for _, r := range h.src.records(p) {
		if r.Offset >= srcFrom {
			want = append(want, r)
		}
	}
	for _, r := range h.dst.records(h.dest, p) {
		if r.Offset >= dstFrom {
			got = append(got, r)
		}
	}
	if len(got) != len(want) {
		h.t.Fatalf("destination holds %d records from %d; want the source's %d committed ones from %d", len(got), dstFrom, len(want), srcFrom)
	}
	for i := range want {
		if err := kafkaconn.SameRecord(want[i], got[i]); err != nil || got[i].Offset != dstFrom+int64(i) {
			h.t.Fatalf("destination offset %d is not source offset %d: %v", got[i].Offset, want[i].Offset, err)
		}
	}
}

// lastTransition is the last state change written.
func (h *harness) lastTransition() service.PartitionTransition {
	ts, _, _ := h.db.log()
	if len(ts) == 0 {
		h.t.Fatal("no transition written")
	}
	return ts[len(ts)-1]
}

// transitionTo is the first state change written to state to.
func (h *harness) transitionTo(to service.PartitionState) service.PartitionTransition {
	h.t.Helper()
	ts, _, _ := h.db.log()
	for _, t := range ts {
		if t.To == to {
			return t
		}
	}
	h.t.Fatalf("no transition to %s in %s", to, describeTransitions(ts))
	return service.PartitionTransition{}
}

// checkpointOf returns a transition's checkpoint (-1, -1 when it has none).
func checkpointOf(t service.PartitionTransition) (int64, int64) {
	if t.SrcNext == nil || t.DstNext == nil {
		return -1, -1
	}
	return *t.SrcNext, *t.DstNext
}

func wantContains(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s %q does not say %q", what, got, want)
	}
}
