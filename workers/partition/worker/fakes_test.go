package worker

// In-memory fakes of every port in ports.go, and a harness that runs a
// Worker against them: no Kafka cluster, no Postgres. Each fake keeps the
// rules its real side enforces where the worker relies on them (the state
// machine and the lease fence on every row write, the checkpoint that never
// moves back, a topic's first source id, the offset map's runs, record
// batches that are real Kafka v2 bytes), and logs what the worker asked of
// it, so that a test can assert both the outcome and how it was reached.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/runtime/testsignal"
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
	roWrites    []bool
	refreshes   int
	desireReads int
	caughtUp    int
	dropped     int

	// Faults, consulted before the write or read they name.
	transitionFault func(service.PartitionTransition) error
	sourceIDFault   error
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
	if db.sourceIDFault != nil {
		return nil, db.sourceIDFault
	}
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
	db.roWrites = append(db.roWrites, enforced)
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
// the background: a pending checkpoint waits for a Save (flush saves all).
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

// flush saves every pending checkpoint, as the checkpointer's ticker does.
func (db fakeCheckpoints) flush() {
	db.mu.Lock()
	defer db.mu.Unlock()
	for k := range db.pending {
		_ = db.saveLocked(k)
	}
}

func (db fakeCheckpoints) Drop(k lease.Key) {
	db.mu.Lock()
	defer db.mu.Unlock()
	delete(db.pending, k)
	db.dropped++
}

func (db fakeCheckpoints) CaughtUp() {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.caughtUp++
}

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

// ---------------------------------------------------------------------------
// Clusters.

// fakeLog is one partition's log: records at consecutive offsets
// [start, end); the records before start were removed (retention).
type fakeLog struct {
	start int64
	recs  []*kgo.Record // recs[i] is at offset start+i
}

func (l *fakeLog) end() int64 { return l.start + int64(len(l.recs)) }

// read returns up to n records in [from, end).
func (l *fakeLog) read(from, end int64, n int) []*kgo.Record {
	from, end = max(from, l.start), min(end, l.end())
	var out []*kgo.Record
	for o := from; o < end && len(out) < n; o++ {
		out = append(out, cloneRecord(l.recs[o-l.start]))
	}
	return out
}

// truncate keeps the records before end (a destination that lost the rest).
func (l *fakeLog) truncate(end int64) {
	if end < l.start {
		l.start, l.recs = end, nil
		return
	}
	l.recs = l.recs[:end-l.start]
}

// removeBefore removes the records before start (retention).
func (l *fakeLog) removeBefore(start int64) {
	if start >= l.end() {
		l.start, l.recs = start, nil
		return
	}
	l.recs = l.recs[start-l.start:]
	l.start = start
}

func cloneRecord(r *kgo.Record) *kgo.Record {
	c := *r
	c.Key, c.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	c.Headers = slices.Clone(r.Headers)
	return &c
}

// rec is a test record: its key, value, a header and a millisecond
// timestamp derived from i, so that records differ and compare exactly
// after a trip through a record batch.
func rec(i int64) *kgo.Record {
	return &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d", i),
		Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i%3)}},
		Timestamp: time.UnixMilli(1_700_000_000_000 + i*10)}
}

// fakeSource is a mirror's source cluster: one topic's partitions.
type fakeSource struct {
	mu         sync.Mutex
	topic      string
	exists     bool
	id         [16]byte
	partitions map[int32]*fakeLog
	state      service.StateSnapshot
	// continuation, when set, is what ProveContinuation returns; otherwise
	// it runs service.ProveContinuation, which answers without a cluster
	// only where it refuses from the snapshot alone.
	continuation *service.PartitionContinuation
	proved       []service.ContinuationInput
	// hold keeps the fetcher from delivering anything while it is set.
	hold bool
	// sourceFault fails Sources.Source.
	sourceFault error
	reads       int // Records calls
	mirrorReads int
	fetches     []int64 // where each Fetch began
	changed     chan struct{}
}

func newFakeSource(topic string, id byte, partitions int) *fakeSource {
	s := &fakeSource{topic: topic, exists: true, id: [16]byte{id}, partitions: map[int32]*fakeLog{}, changed: make(chan struct{})}
	for p := range int32(partitions) {
		s.partitions[p] = &fakeLog{}
	}
	return s
}

// produce appends records with the values rec gives for offsets [end, end+n).
func (s *fakeSource) produce(p int32, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.partitions[p]
	for range n {
		r := rec(l.end())
		r.Offset = l.end()
		l.recs = append(l.recs, r)
	}
	s.wake()
}

func (s *fakeSource) with(fn func(s *fakeSource)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
	s.wake()
}

// wake tells the fetchers; mu is held.
func (s *fakeSource) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *fakeSource) records(p int32) []*kgo.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.partitions[p]
	return l.read(l.start, l.end(), int(l.end()-l.start))
}

type fakeSources struct{ src *fakeSource }

func (f fakeSources) Source(_ context.Context, mirror string) (Source, error) {
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	if err := f.src.sourceFault; err != nil {
		return nil, err
	}
	return f.src, nil
}

func (s *fakeSource) Offsets(_ context.Context, topic string, partition int32, committed bool) (kafkaconn.PartitionOffsets, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.partitions[partition]
	if !s.exists || topic != s.topic || l == nil {
		return kafkaconn.PartitionOffsets{}, kafkaconn.ErrTopicMissing
	}
	return kafkaconn.PartitionOffsets{Start: l.start, End: l.end()}, nil
}

func (s *fakeSource) Topic(_ context.Context, topic string) (SourceTopic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists || topic != s.topic {
		return SourceTopic{}, nil
	}
	return SourceTopic{Exists: true, ID: s.id, Partitions: len(s.partitions)}, nil
}

func (s *fakeSource) Records(_ context.Context, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	l := s.partitions[partition]
	if !s.exists || topic != s.topic || l == nil {
		return nil, kafkaconn.ErrTopicMissing
	}
	return l.read(from, end, n), nil
}

func (s *fakeSource) MirrorState(context.Context) (service.StateSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mirrorReads++
	return s.state, nil
}

func (s *fakeSource) ProveContinuation(ctx context.Context, in service.ContinuationInput) (service.PartitionContinuation, error) {
	s.mu.Lock()
	s.proved = append(s.proved, in)
	pc := s.continuation
	s.mu.Unlock()
	if pc != nil {
		return *pc, nil
	}
	return service.ProveContinuation(ctx, in)
}

// fetchBatchRecords is how many records the fake fetcher puts in a batch,
// and fetchBatches how many batches in a response.
const (
	fetchBatchRecords = 3
	fetchBatches      = 2
)

// Fetch delivers the partition's records from from on as real v2 record
// batches (recordbatch.Split of encoded bytes), a response at a time, and
// waits for more at the end; a position before the log's start is
// OFFSET_OUT_OF_RANGE, as a broker answers.
func (s *fakeSource) Fetch(topic string, partition int32, from int64, deliver func(FetchBatch)) (Fetch, error) {
	s.mu.Lock()
	s.fetches = append(s.fetches, from)
	s.mu.Unlock()
	f := &fakeFetch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		pos := from
		for {
			s.mu.Lock()
			wake, l := s.changed, s.partitions[partition]
			var fb *FetchBatch
			switch {
			case s.hold || l == nil:
			case pos < l.start:
				fb = &FetchBatch{Err: kerr.OffsetOutOfRange, LSO: -1}
			case pos < l.end():
				fb = &FetchBatch{LSO: l.end()}
				var raw []byte
				for range fetchBatches {
					recs := l.read(pos, l.end(), fetchBatchRecords)
					if len(recs) == 0 {
						break
					}
					raw = append(raw, encodeBatch(recs)...)
					pos = recs[len(recs)-1].Offset + 1
				}
				bs, err := recordbatch.Split(raw)
				if err != nil {
					panic(err)
				}
				fb.Batches = bs
			}
			s.mu.Unlock()
			select {
			case <-f.stop:
				return
			default:
			}
			if fb != nil {
				deliver(*fb)
				if fb.Err == nil {
					continue
				}
			}
			select {
			case <-f.stop:
				return
			case <-wake:
			}
		}
	}()
	return f, nil
}

type fakeFetch struct {
	once       sync.Once
	stop, done chan struct{}
}

func (f *fakeFetch) Trouble() (time.Time, error) { return time.Time{}, nil }

func (f *fakeFetch) Stop() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// encodeBatch encodes records, at consecutive offsets, as a broker stores
// them: one uncompressed v2 batch with create-time timestamps.
func encodeBatch(recs []*kgo.Record) []byte {
	first := recs[0].Timestamp.UnixMilli()
	maxTS := first
	var body []byte
	for i, r := range recs {
		ts := r.Timestamp.UnixMilli()
		maxTS = max(maxTS, ts)
		kr := kmsg.Record{TimestampDelta64: ts - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		rb := kr.AppendTo(nil)[1:] // without the length varint 0
		body = binary.AppendVarint(body, int64(len(rb)))
		body = append(body, rb...)
	}
	n := int32(len(recs))
	b := kmsg.RecordBatch{FirstOffset: recs[0].Offset, PartitionLeaderEpoch: 1, Magic: 2,
		LastOffsetDelta: n - 1, FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: n, Records: body}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// decodeBatch is what a broker appends of a produced v2 batch: its records,
// their timestamps from the batch's first.
func decodeBatch(raw []byte) ([]*kgo.Record, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return nil, err
	}
	if b.Attributes&0x07 != 0 {
		return nil, errors.New("the fake destination takes uncompressed batches only")
	}
	data := b.Records
	var out []*kgo.Record
	for range b.NumRecords {
		n, k := binary.Varint(data)
		if k <= 0 || int64(len(data)) < int64(k)+n {
			return nil, errors.New("short record")
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:int64(k)+n]); err != nil {
			return nil, err
		}
		data = data[int64(k)+n:]
		kr := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(b.FirstTimestamp + r.TimestampDelta64)}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		out = append(out, kr)
	}
	return out, nil
}

// fakeDestination is the destination cluster's topics, and the producer's
// view of them (fakeCopy appends to its logs).
type fakeDestination struct {
	mu     sync.Mutex
	topics map[string]map[int32]*fakeLog
	acl    map[string]bool
	// aclCalls logs ReadOnlyACL's calls.
	aclCalls   []bool
	enforces   bool
	created    []string
	recreated  []string
	reads      int
	offsetsErr error
	// changed is closed (and replaced) at every write to a log.
	changed chan struct{}
}

func newFakeDestination() *fakeDestination {
	return &fakeDestination{topics: map[string]map[int32]*fakeLog{}, acl: map[string]bool{}, enforces: true,
		changed: make(chan struct{})}
}

// wrote wakes the waiters; mu is held.
func (d *fakeDestination) wrote() {
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *fakeDestination) createTopic(topic string, partitions int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.createLocked(topic, partitions)
}

func (d *fakeDestination) createLocked(topic string, partitions int) {
	logs := map[int32]*fakeLog{}
	for p := range int32(partitions) {
		logs[p] = &fakeLog{}
	}
	d.topics[topic] = logs
	d.wrote()
}

// append writes records to a partition as another producer would.
func (d *fakeDestination) append(topic string, p int32, recs ...*kgo.Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.topics[topic][p]
	for _, r := range recs {
		c := cloneRecord(r)
		c.Offset = l.end()
		l.recs = append(l.recs, c)
	}
	d.wrote()
}

func (d *fakeDestination) with(topic string, p int32, fn func(l *fakeLog)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d.topics[topic][p])
	d.wrote()
}

func (d *fakeDestination) records(topic string, p int32) []*kgo.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.topics[topic][p]
	if l == nil {
		return nil
	}
	return l.read(l.start, l.end(), int(l.end()-l.start))
}

func (d *fakeDestination) Offsets(_ context.Context, topic string, partition int32) (kafkaconn.PartitionOffsets, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.offsetsErr != nil {
		return kafkaconn.PartitionOffsets{}, d.offsetsErr
	}
	l := d.topics[topic][partition]
	if l == nil {
		return kafkaconn.PartitionOffsets{}, kafkaconn.ErrTopicMissing
	}
	return kafkaconn.PartitionOffsets{Start: l.start, End: l.end()}, nil
}

func (d *fakeDestination) Records(_ context.Context, topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	l := d.topics[topic][partition]
	if l == nil {
		return nil, kafkaconn.ErrTopicMissing
	}
	return l.read(from, end, n), nil
}

func (d *fakeDestination) EnsureTopic(ctx context.Context, src Source, mirror, srcTopic, dstTopic string, replicationFactor int16) (DestinationTopic, error) {
	st, err := src.Topic(ctx, srcTopic)
	if err != nil {
		return DestinationTopic{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.topics[dstTopic]; ok {
		return DestinationTopic{Partitions: len(t)}, nil
	}
	if !st.Exists {
		return DestinationTopic{}, fmt.Errorf("source topic %s does not exist", srcTopic)
	}
	d.createLocked(dstTopic, st.Partitions)
	d.created = append(d.created, dstTopic)
	return DestinationTopic{Created: true, Partitions: st.Partitions}, nil
}

func (d *fakeDestination) RecreateTopic(_ context.Context, topic string, partitions int32, _ int16) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recreated = append(d.recreated, topic)
	d.createLocked(topic, int(partitions))
	return nil
}

func (d *fakeDestination) ReadOnlyACL(_ context.Context, topic string, on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.aclCalls = append(d.aclCalls, on)
	d.acl[topic] = on
	return nil
}

func (d *fakeDestination) EnforcesACLs(context.Context) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.enforces
}

// fakeCopy is Copy: Produce appends a batch's records to the fake
// destination's log at its end, as a broker does, and answers the promise
// with where they landed, in produce order (at once, in the caller's
// goroutine). produceErr, when set, fails the batches instead.
type fakeCopy struct {
	dst        *fakeDestination
	mu         sync.Mutex
	produceErr error
	// failNext fails the next batch only.
	failNext  error
	batches   int
	refreshed int
}

func (c *fakeCopy) Produce(ctx context.Context, topic string, partition int32, b batchproduce.Payload, promise func(batchproduce.Result)) {
	c.mu.Lock()
	c.batches++
	perr := c.produceErr
	if c.failNext != nil {
		perr, c.failNext = c.failNext, nil
	}
	c.mu.Unlock()
	if err := context.Cause(ctx); err != nil {
		promise(batchproduce.Result{Err: err})
		return
	}
	if perr != nil {
		promise(batchproduce.Result{Err: perr})
		return
	}
	if fs, ok := b.(batchproduce.FirstSender); ok {
		fs.FirstSent()
	}
	recs, err := decodeBatch(b.Produced(1, 0, 0))
	if err != nil {
		promise(batchproduce.Result{Err: err})
		return
	}
	if int32(len(recs)) != b.Records() {
		promise(batchproduce.Result{Err: fmt.Errorf("batch says %d records, holds %d", b.Records(), len(recs))})
		return
	}
	c.dst.mu.Lock()
	l := c.dst.topics[topic][partition]
	if l == nil {
		c.dst.mu.Unlock()
		promise(batchproduce.Result{Err: kerr.UnknownTopicOrPartition})
		return
	}
	base := l.end()
	for i, r := range recs {
		r.Offset = base + int64(i)
		l.recs = append(l.recs, r)
	}
	c.dst.wrote()
	c.dst.mu.Unlock()
	promise(batchproduce.Result{BaseOffset: base})
}

func (c *fakeCopy) ProducerTrouble(string, int32) (time.Time, error) { return time.Time{}, nil }

func (c *fakeCopy) RefreshProducerMetadata() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshed++
}

func (c *fakeCopy) Recompression(string) (recordbatch.Codec, bool) { return 0, false }

func (c *fakeCopy) Throttle(context.Context, <-chan struct{}, lease.Key, func() int64) (time.Duration, error) {
	return 0, nil
}

func (c *fakeCopy) HealthChanged() <-chan struct{} { return nil }

// fakeWatch is DestinationWatch: AwaitSettled answers at once; Watch hands
// the running session a channel the test interrupts it on; TakeLoss
// returns the loss the test set.
type fakeWatch struct {
	mu          sync.Mutex
	watching    map[lease.Key]chan Interruption
	watched     chan struct{} // closed at each Watch
	losses      map[lease.Key]Loss
	writtenOff  []string
	unsettled   int
	settleWaits int
}

func newFakeWatch() *fakeWatch {
	return &fakeWatch{watching: map[lease.Key]chan Interruption{}, watched: make(chan struct{}), losses: map[lease.Key]Loss{}}
}

func (f *fakeWatch) AwaitSettled(context.Context, lease.Key, func(int64, time.Time)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settleWaits++
	return nil
}

func (f *fakeWatch) KeepUnsettled(lease.Key, string, *batchproduce.Acks, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsettled++
}

func (f *fakeWatch) Watch(k lease.Key, _ string, _ *batchproduce.Acks) (<-chan Interruption, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan Interruption, 1)
	f.watching[k] = ch
	close(f.watched)
	f.watched = make(chan struct{})
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.watching[k] == ch {
			delete(f.watching, k)
		}
	}
}

// interrupt ends k's running session from outside, as the engine's
// destination watch does; it waits for a session to be watched.
func (f *fakeWatch) interrupt(t *testing.T, k lease.Key, i Interruption) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		f.mu.Lock()
		ch, w := f.watching[k], f.watched
		f.mu.Unlock()
		if ch != nil {
			ch <- i
			return
		}
		select {
		case <-w:
		case <-deadline:
			t.Fatalf("no session of %v is watched", k)
		}
	}
}

func (f *fakeWatch) setLoss(k lease.Key, l Loss) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.losses[k] = l
}

func (f *fakeWatch) TakeLoss(k lease.Key) (Loss, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.losses[k]
	delete(f.losses, k)
	return l, ok
}

func (f *fakeWatch) WriteOff(topic, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writtenOff = append(f.writtenOff, topic)
}

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

// newTestLease returns a lease trusted for an hour, as the lease manager
// hands one to the engine. lease.Lease has no constructor outside its
// package (the manager makes them from the database), so its deadline is
// set through reflection: Valid() reads only it and ended.
func newTestLease(key lease.Key, owner string, epoch int64, previous string) *lease.Lease {
	l := &lease.Lease{Key: key, Owner: owner, Epoch: epoch, Previous: previous}
	setLeaseDeadline(l, time.Now().Add(time.Hour))
	return l
}

// setLeaseDeadline moves a test lease's deadline (in the past: it is no
// longer trusted), under its own lock.
func setLeaseDeadline(l *lease.Lease, d time.Time) {
	v := reflect.ValueOf(l).Elem()
	mu, dl := v.FieldByName("mu"), v.FieldByName("deadline")
	if !mu.IsValid() || mu.Type() != reflect.TypeFor[sync.Mutex]() || !dl.IsValid() || dl.Type() != reflect.TypeFor[time.Time]() {
		panic("lease.Lease has no mu sync.Mutex and deadline time.Time fields any more: update newTestLease")
	}
	m := (*sync.Mutex)(unsafe.Pointer(mu.UnsafeAddr()))
	m.Lock()
	*(*time.Time)(unsafe.Pointer(dl.UnsafeAddr())) = d
	m.Unlock()
}

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
	w      *Worker
	lease  *lease.Lease
	cancel context.CancelFunc
	exited chan struct{}
}

// run starts partition p's worker under a lease of (owner, epoch) taken
// over from previous; the test's cleanup stops it.
func (h *harness) run(p int32, owner string, epoch int64, previous string) *running {
	l := newTestLease(keyOf(p), owner, epoch, previous)
	w := New(h.cfg, h.ports(), l)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, lease: l, cancel: cancel, exited: make(chan struct{})}
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
