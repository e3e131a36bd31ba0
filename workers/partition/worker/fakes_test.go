package worker

// In-memory fakes of every port in ports.go (the database's here: rows,
// topic rows, offset map, checkpoints, desires; the clusters' in
// fake_clusters_test.go), and a harness that runs a Worker against them
// (harness_test.go): no Kafka cluster, no Postgres. Each fake keeps the
// rules its real side enforces where the worker relies on them (the state
// machine and the lease fence on every row write, the checkpoint that never
// moves back, a topic's first source id, the offset map's runs, record
// batches that are real Kafka v2 bytes), and logs what the worker asked of
// it, so that a test can assert both the outcome and how it was reached.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
)

// waitFor bounds every wait of a test for something the worker does.
const waitFor = 5 * time.Second

// ---------------------------------------------------------------------------
// The database: partition rows, topic rows, offset maps, desires, pending
// checkpoints. One mutex; changed is closed (and replaced) at every write,
// so tests wait for a row without polling on a timer.

type fakeTopicRow struct {
	desire   Desire
	sourceID []byte
	readOnly *bool
}

type fakeDB struct {
	mu sync.Mutex
	// owner is the instance whose checkpointer this is (Checkpoints.Save
	// is fenced by it and each checkpoint's epoch).
	owner   string
	rows    map[repo.PartitionID]*repo.Partition
	runs    map[repo.PartitionID][]repo.OffsetRun
	topics  map[[2]string]*fakeTopicRow
	pending map[lease.Key]*repo.Checkpoint
	changed chan struct{}
	// desireChanged is the desire cache's change signal (Desires.Changed).
	desireChanged chan struct{}

	// What the worker wrote, in order.
	transitions []service.PartitionTransition
	realigns    []service.PartitionRealignment
	noted       []notedError
	accepted    [][2][]byte
	tails       []*service.DivergentTail
	recreated   int
	refreshes   int
	desireReads int
	dropped     int

	// Faults, consulted before the write or read they name.
	transitionFault func(service.PartitionTransition) error
}

// notedError is a RecordPartitionError (end -1) or RecordPartitionLoss.
type notedError struct {
	state service.PartitionState
	msg   string
	end   int64
}

func newFakeDB(owner string) *fakeDB {
	return &fakeDB{owner: owner, rows: map[repo.PartitionID]*repo.Partition{},
		runs: map[repo.PartitionID][]repo.OffsetRun{}, topics: map[[2]string]*fakeTopicRow{},
		pending: map[lease.Key]*repo.Checkpoint{}, changed: make(chan struct{}), desireChanged: make(chan struct{})}
}

// wrote wakes the waiters; mu is held.
func (db *fakeDB) wrote() {
	close(db.changed)
	db.changed = make(chan struct{})
}

func ptr[T any](v T) *T { return &v }

func clonePartition(p repo.Partition) repo.Partition {
	cp := func(v *int64) *int64 {
		if v == nil {
			return nil
		}
		return ptr(*v)
	}
	p.SrcNext, p.DstNext = cp(p.SrcNext), cp(p.DstNext)
	p.SourceEndOffset, p.DestinationEndOffset = cp(p.SourceEndOffset), cp(p.DestinationEndOffset)
	p.LastMirroredSrc, p.LastMirroredDst = cp(p.LastMirroredSrc), cp(p.LastMirroredDst)
	if p.NextRetryAt != nil {
		p.NextRetryAt = ptr(*p.NextRetryAt)
	}
	if p.DivergentTail != nil {
		p.DivergentTail = ptr(*p.DivergentTail)
	}
	return p
}

func idOf(f repo.LeaseFence) repo.PartitionID {
	return repo.PartitionID{Mirror: f.Mirror, Topic: f.Topic, Partition: f.Partition}
}

// holds says whether the fence's lease is the row's; mu is held.
func (db *fakeDB) holds(f repo.LeaseFence) (*repo.Partition, bool) {
	r := db.rows[idOf(f)]
	return r, r != nil && r.LeaseOwner == f.Owner && r.LeaseEpoch == f.Epoch
}

// lastMirrored sets the row's last mirrored offsets from the end of its
// offset map, as every state write does; mu is held.
func (db *fakeDB) lastMirrored(r *repo.Partition) {
	runs := db.runs[repo.PartitionID{Mirror: r.Mirror, Topic: r.Topic, Partition: r.Partition}]
	r.LastMirroredSrc, r.LastMirroredDst = nil, nil
	var last *repo.OffsetRun
	for i := range runs {
		if last == nil || runs[i].SrcStart > last.SrcStart {
			last = &runs[i]
		}
	}
	if last != nil {
		r.LastMirroredSrc, r.LastMirroredDst = ptr(last.SrcStart+last.Count-1), ptr(last.DstStart+last.Count-1)
	}
}

func (db *fakeDB) addPartition(p repo.Partition) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if p.HandedBackDst == 0 {
		p.HandedBackDst = -1
	}
	db.rows[repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}] = &p
	db.wrote()
}

// row returns a copy of a partition's row.
func (db *fakeDB) row(id repo.PartitionID) repo.Partition {
	db.mu.Lock()
	defer db.mu.Unlock()
	return clonePartition(*db.rows[id])
}

// update changes a row as someone else would (another owner, an operator).
func (db *fakeDB) update(id repo.PartitionID, fn func(*repo.Partition)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	fn(db.rows[id])
	db.wrote()
}

func (db *fakeDB) setRuns(id repo.PartitionID, runs ...repo.OffsetRun) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.runs[id] = slices.Clone(runs)
}

func (db *fakeDB) runsOf(id repo.PartitionID) []repo.OffsetRun {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := slices.Clone(db.runs[id])
	slices.SortFunc(out, func(a, b repo.OffsetRun) int { return int(a.SrcStart - b.SrcStart) })
	return out
}

func (db *fakeDB) setTopic(mirror, topic string, d Desire, sourceID []byte) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.topics[[2]string{mirror, topic}] = &fakeTopicRow{desire: d, sourceID: sourceID}
	db.desireChangedLocked()
}

func (db *fakeDB) topic(mirror, topic string) fakeTopicRow {
	db.mu.Lock()
	defer db.mu.Unlock()
	return *db.topics[[2]string{mirror, topic}]
}

// removeTopic deletes a topic's row (its mirror was deleted).
func (db *fakeDB) removeTopic(mirror, topic string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	delete(db.topics, [2]string{mirror, topic})
	db.desireChangedLocked()
}

// setDesire changes a topic's desired state, as topics:pause and the like
// do, and the desire cache sees it.
func (db *fakeDB) setDesire(mirror, topic string, fn func(*Desire)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	fn(&db.topics[[2]string{mirror, topic}].desire)
	db.desireChangedLocked()
}

func (db *fakeDB) desireChangedLocked() {
	close(db.desireChanged)
	db.desireChanged = make(chan struct{})
	db.wrote()
}

// snapshot returns what the worker wrote so far.
func (db *fakeDB) log() (ts []service.PartitionTransition, rs []service.PartitionRealignment, noted []notedError) {
	db.mu.Lock()
	defer db.mu.Unlock()
	return slices.Clone(db.transitions), slices.Clone(db.realigns), slices.Clone(db.noted)
}

// waitRow waits until the partition's row satisfies ok.
func (db *fakeDB) waitRow(t *testing.T, id repo.PartitionID, what string, ok func(repo.Partition) bool) repo.Partition {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		db.mu.Lock()
		r := clonePartition(*db.rows[id])
		ch := db.changed
		db.mu.Unlock()
		if ok(r) {
			return r
		}
		select {
		case <-ch:
		case <-deadline:
			ts, _, _ := db.log()
			t.Fatalf("partition %d: %s: not within %s; row is %s (error %q, retryable %v, attempt %d), transitions %s",
				id.Partition, what, waitFor, r.State, r.Error, r.Retryable, r.RetryAttempt, describeTransitions(ts))
		}
	}
}

// waitState waits until the row is in state s.
func (db *fakeDB) waitState(t *testing.T, id repo.PartitionID, s service.PartitionState) repo.Partition {
	t.Helper()
	return db.waitRow(t, id, "state "+s.String(), func(r repo.Partition) bool { return r.State == s })
}

func describeTransitions(ts []service.PartitionTransition) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "[%s→%s %q]", t.From, t.To, cmpStr(t.Reason, t.Error))
	}
	return b.String()
}

// fakeRows is PartitionRows: state changes through the service's state
// machine, fenced by owner, epoch and state, as
// service.Workers.TransitionPartition and repo.PartitionsTransitions do.
type fakeRows struct{ *fakeDB }

func (db fakeRows) Row(id repo.PartitionID) (repo.Partition, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	r := db.rows[id]
	if r == nil {
		return repo.Partition{}, repo.ErrNotFound
	}
	return clonePartition(*r), nil
}

func (db fakeRows) Transition(t service.PartitionTransition) (repo.Partition, error) {
	if err := service.CheckTransition(t.From, t.To); err != nil {
		return repo.Partition{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.transitionFault != nil {
		if err := db.transitionFault(t); err != nil {
			return repo.Partition{}, err
		}
	}
	r, ok := db.holds(repo.LeaseFence{Mirror: t.Mirror, Topic: t.Topic, Partition: t.Partition, Owner: t.Owner, Epoch: t.Epoch})
	if !ok || r.State != t.From {
		return repo.Partition{}, service.ErrLeaseLost
	}
	db.transitions = append(db.transitions, t)
	r.PreviousState, r.State = r.State, t.To
	r.Error, r.Retryable, r.RetryAttempt, r.NextRetryAt = t.Error, t.Retryable, t.RetryAttempt, t.NextRetryAt
	if t.SrcNext != nil && t.DstNext != nil {
		r.SrcNext, r.DstNext = ptr(*t.SrcNext), ptr(*t.DstNext)
	}
	r.LostRecords += t.LostRecordsAdd
	db.lastMirrored(r)
	if t.To == service.StateMirroring {
		r.AlignedEpoch = t.Epoch
	}
	r.HandedBackDst = -1
	now := time.Now()
	r.StateChangedAt, r.UpdatedAt = &now, now
	db.wrote()
	return clonePartition(*r), nil
}

func (db fakeRows) Realign(a service.PartitionRealignment) (repo.Partition, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	r, ok := db.holds(repo.LeaseFence{Mirror: a.Mirror, Topic: a.Topic, Partition: a.Partition, Owner: a.Owner, Epoch: a.Epoch})
	if !ok || r.State != a.State {
		return repo.Partition{}, service.ErrLeaseLost
	}
	db.realigns = append(db.realigns, a)
	// The state, the previous state and the retries are kept; the error is
	// cleared.
	r.Error = ""
	r.SrcNext, r.DstNext = ptr(a.SrcNext), ptr(a.DstNext)
	r.LostRecords += a.LostRecordsAdd
	db.lastMirrored(r)
	r.AlignedEpoch, r.HandedBackDst = a.Epoch, -1
	db.wrote()
	return clonePartition(*r), nil
}

func (db fakeRows) RecordPartitionError(_ context.Context, f repo.LeaseFence, state service.PartitionState, msg string) error {
	return db.note(f, state, msg, -1)
}

func (db fakeRows) RecordPartitionLoss(_ context.Context, f repo.LeaseFence, state service.PartitionState, msg string, dstEnd int64) error {
	return db.note(f, state, msg, max(dstEnd, 0))
}

func (db fakeRows) note(f repo.LeaseFence, state service.PartitionState, msg string, end int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.noted = append(db.noted, notedError{state: state, msg: msg, end: end})
	r, ok := db.holds(f)
	if !ok || r.State != state {
		return nil // fenced: nothing written, no error (an UPDATE of no row)
	}
	r.Error = msg
	if end >= 0 {
		r.DestinationEndOffset = ptr(end)
	}
	db.wrote()
	return nil
}

// fakeTopics is TopicRows, as repo's topic_worker_writes.go writes them.
type fakeTopics struct{ *fakeDB }

func (db fakeTopics) TopicState(_ context.Context, mirror, topic string) (repo.TopicWorkerState, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t := db.topics[[2]string{mirror, topic}]
	if t == nil {
		return repo.TopicWorkerState{}, repo.ErrNotFound
	}
	s := repo.TopicWorkerState{SourceTopicID: slices.Clone(t.sourceID)}
	if t.readOnly != nil {
		s.ReadOnlyEnforced = ptr(*t.readOnly)
	}
	return s, nil
}

func (db fakeTopics) topicOf(f repo.LeaseFence) (*fakeTopicRow, bool) {
	_, ok := db.holds(f)
	t := db.topics[[2]string{f.Mirror, f.Topic}]
	return t, ok && t != nil
}

func (db fakeTopics) RecordSourceTopicID(_ context.Context, f repo.LeaseFence, id []byte) ([]byte, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.topicOf(f)
	if !ok {
		return nil, repo.ErrNotFound
	}
	if t.sourceID == nil { // the first id is kept
		t.sourceID = slices.Clone(id)
		db.wrote()
	}
	return slices.Clone(t.sourceID), nil
}

func (db fakeTopics) AcceptRecreatedSourceTopic(_ context.Context, f repo.LeaseFence, old, id []byte) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.accepted = append(db.accepted, [2][]byte{old, id})
	if t, ok := db.topicOf(f); ok && bytes.Equal(t.sourceID, old) {
		t.sourceID = slices.Clone(id)
		db.wrote()
	}
	return nil
}

func (db fakeTopics) RecordReadOnlyEnforced(_ context.Context, f repo.LeaseFence, enforced bool) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.topicOf(f)
	if !ok {
		return repo.ErrNotFound
	}
	t.readOnly = ptr(enforced)
	db.wrote()
	return nil
}

func (db fakeTopics) RecordDestinationRecreated(_ context.Context, f repo.LeaseFence) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.topicOf(f)
	if !ok {
		return repo.ErrNotFound
	}
	db.recreated++
	t.sourceID = nil
	for id, r := range db.rows {
		if id.Mirror == f.Mirror && id.Topic == f.Topic {
			r.SrcNext, r.DstNext, r.DestinationEndOffset, r.DivergentTail = nil, nil, ptr(int64(0)), nil
			delete(db.runs, id)
		}
	}
	// The request is cleared: the desire cache sees the change.
	t.desire.Recreate = false
	db.desireChangedLocked()
	return nil
}

func (db fakeTopics) KeepDivergentTail(_ context.Context, f repo.LeaseFence, tail *service.DivergentTail) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	r, ok := db.holds(f)
	if !ok {
		return repo.ErrNotFound
	}
	db.tails = append(db.tails, tail)
	r.DivergentTail = nil
	if tail != nil {
		r.DivergentTail = ptr(*tail)
	}
	db.wrote()
	return nil
}

func (db fakeTopics) CountStillMirrored(_ context.Context, f repo.LeaseFence) (int, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := 0
	for id, r := range db.rows {
		if id.Mirror == f.Mirror && id.Topic == f.Topic && id.Partition != f.Partition &&
			r.State != service.StateStopped && r.State != service.StateStopping && r.State != service.StateUnknown {
			n++
		}
	}
	return n, nil
}

// fakeOffsetMap is OffsetMap, as repo's offset-map queries read and cut it.
type fakeOffsetMap struct{ *fakeDB }

func (db fakeOffsetMap) FirstRun(_ context.Context, id repo.PartitionID) (repo.OffsetRun, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	var first *repo.OffsetRun
	for i, r := range db.runs[id] {
		if first == nil || r.SrcStart < first.SrcStart {
			first = &db.runs[id][i]
		}
	}
	if first == nil {
		return repo.OffsetRun{}, repo.ErrNotFound
	}
	return *first, nil
}

func (db fakeOffsetMap) RunAt(_ context.Context, id repo.PartitionID, dst int64) (repo.OffsetRun, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	var found *repo.OffsetRun
	for i, r := range db.runs[id] {
		if r.DstStart <= dst && dst < r.DstStart+r.Count && (found == nil || r.DstStart > found.DstStart) {
			found = &db.runs[id][i]
		}
	}
	if found == nil {
		return repo.OffsetRun{}, repo.ErrNotFound
	}
	return *found, nil
}

func (db fakeOffsetMap) TruncateRuns(_ context.Context, f repo.LeaseFence, dstEnd int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.holds(f); !ok {
		return nil
	}
	id := idOf(f)
	var kept []repo.OffsetRun
	for _, r := range db.runs[id] {
		switch {
		case r.DstStart >= dstEnd:
		case r.DstStart+r.Count > dstEnd:
			r.Count = dstEnd - r.DstStart
			kept = append(kept, r)
		default:
			kept = append(kept, r)
		}
	}
	db.runs[id] = kept
	return nil
}

func (db fakeOffsetMap) DeleteRuns(_ context.Context, f repo.LeaseFence) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.holds(f); ok {
		delete(db.runs, idOf(f))
	}
	return nil
}

// fakeCheckpoints is Checkpoints: Update keeps a partition's latest
// progress pending, merging runs as the checkpointer does; Save applies it
// to the row and the offset map as repo.CheckpointsSave does (fenced by
// owner and epoch; never moving the checkpoint back). Nothing is saved in
// the background: a pending checkpoint waits for a Save.
type fakeCheckpoints struct{ *fakeDB }

func (db fakeCheckpoints) Update(k lease.Key, cp repo.Checkpoint) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if old := db.pending[k]; old != nil && old.Epoch == cp.Epoch {
		runs := slices.Clone(old.Runs)
		for _, r := range cp.Runs {
			if i := slices.IndexFunc(runs, func(o repo.OffsetRun) bool { return o.SrcStart == r.SrcStart }); i >= 0 {
				runs[i] = r
			} else {
				runs = append(runs, r)
			}
		}
		cp.Runs = runs
		cp.ResetRetries = cp.ResetRetries || old.ResetRetries
		if cp.SourceEnd < 0 {
			cp.SourceEnd = old.SourceEnd
		}
		if cp.DestinationEnd < 0 {
			cp.DestinationEnd = old.DestinationEnd
		}
	}
	cp.Runs = slices.Clone(cp.Runs)
	db.pending[k] = &cp
}

var errFakeFenced = errors.New("checkpoint not saved: the lease moved on")

func (db fakeCheckpoints) Save(_ context.Context, k lease.Key) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.saveLocked(k)
}

func (db fakeCheckpoints) saveLocked(k lease.Key) error {
	cp := db.pending[k]
	if cp == nil {
		return nil
	}
	delete(db.pending, k)
	id := repo.PartitionID{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition}
	r := db.rows[id]
	if r == nil || r.LeaseOwner != db.owner || r.LeaseEpoch != cp.Epoch {
		return errFakeFenced
	}
	if r.DstNext == nil || cp.DstNext >= *r.DstNext {
		r.SrcNext, r.DstNext = ptr(cp.SrcNext), ptr(cp.DstNext)
	}
	if cp.SourceEnd >= 0 {
		r.SourceEndOffset = ptr(cp.SourceEnd)
	}
	if cp.DestinationEnd >= 0 {
		r.DestinationEndOffset = ptr(cp.DestinationEnd)
	}
	if cp.ResetRetries {
		r.RetryAttempt = 0
	}
	r.ThrottledMs = max(r.ThrottledMs, cp.ThrottledMs)
	r.HandedBackDst = -1
	if cp.HandBack {
		r.HandedBackDst = cp.DstNext
	}
	runs := db.runs[id]
	for _, n := range cp.Runs {
		if i := slices.IndexFunc(runs, func(o repo.OffsetRun) bool { return o.SrcStart == n.SrcStart }); i >= 0 {
			runs[i] = n
		} else {
			runs = append(runs, n)
		}
	}
	db.runs[id] = runs
	db.lastMirrored(r)
	db.wrote()
	return nil
}

func (db fakeCheckpoints) Drop(k lease.Key) {
	db.mu.Lock()
	defer db.mu.Unlock()
	delete(db.pending, k)
	db.dropped++
}

func (db fakeCheckpoints) CaughtUp() {}

// fakeDesires is Desires: the desire cache, read straight from the topic
// rows. Changed is closed at every change of a desire.
type fakeDesires struct{ *fakeDB }

func (db fakeDesires) Desire(mirror, topic string) (Desire, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.desireReads++
	db.wrote()
	t := db.topics[[2]string{mirror, topic}]
	if t == nil {
		return Desire{}, false
	}
	return t.desire, true
}

func (db fakeDesires) Changed() <-chan struct{} {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.desireChanged
}

func (db fakeDesires) Refresh(context.Context) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.refreshes++
	return nil
}
