package worker

// In-memory source and destination clusters, the fetcher that reads one
// and the producer that writes the other, and the destination watch: the
// ports Sources/Source, Fetch, Destination, Copy and DestinationWatch.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/service"
	"kmirror/workers/lease"
)

// fakeLog is one partition's log: records at consecutive offsets
// [start, end); the records before start were removed (retention).
type fakeLog struct {
	start int64
	recs  []*kgo.Record // recs[i] is at offset start+i
	// txn marks the offsets written in transactions (a source's): its
	// producer's records, and the markers that end them.
	txn map[int64]txnEntry
	// starts marks where the source's stored batches begin (a producer's
	// request each, fetchBatchRecords records at most; a marker alone).
	// A fetch returns whole stored batches, as a broker does, so one from
	// an offset inside a batch gets records before it too.
	starts map[int64]bool
}

// append adds r at the log's end; batch says it starts a stored batch.
func (l *fakeLog) append(r *kgo.Record, batch bool) {
	r.Offset = l.end()
	if batch {
		if l.starts == nil {
			l.starts = map[int64]bool{}
		}
		l.starts[r.Offset] = true
	}
	l.recs = append(l.recs, r)
}

// txnEntry is an offset of producer pid's transaction: a record, or the
// marker that commits or aborts it.
type txnEntry struct {
	pid    int64
	marker int8
}

const (
	txnCommit int8 = 1
	txnAbort  int8 = 2
)

func (l *fakeLog) end() int64 { return l.start + int64(len(l.recs)) }

// committed says whether a read_committed consumer reads offset o: no
// marker, and no record of a transaction that was aborted or is still
// open.
func (l *fakeLog) committed(o int64) bool {
	t, ok := l.txn[o]
	if !ok {
		return true
	}
	if t.marker != 0 {
		return false
	}
	for m := o + 1; m < l.end(); m++ {
		if e, ok := l.txn[m]; ok && e.pid == t.pid && e.marker != 0 {
			return e.marker == txnCommit
		}
	}
	return false
}

// lso is the last stable offset: the first offset of a transaction still
// open, or the end.
func (l *fakeLog) lso() int64 {
	open := map[int64]int64{}
	for o := l.start; o < l.end(); o++ {
		if t, ok := l.txn[o]; ok {
			if _, started := open[t.pid]; t.marker == 0 && !started {
				open[t.pid] = o
			} else if t.marker != 0 {
				delete(open, t.pid)
			}
		}
	}
	lso := l.end()
	for _, o := range open {
		lso = min(lso, o)
	}
	return lso
}

// aborted lists the aborted transactions that overlap offsets [from, to],
// as a fetch response does.
func (l *fakeLog) aborted(from, to int64) []recordbatch.Aborted {
	var out []recordbatch.Aborted
	open := map[int64]int64{}
	for o := l.start; o < l.end(); o++ {
		t, ok := l.txn[o]
		switch {
		case !ok:
		case t.marker == 0:
			if _, started := open[t.pid]; !started {
				open[t.pid] = o
			}
		default:
			if first, started := open[t.pid]; started && t.marker == txnAbort && first <= to && o >= from {
				out = append(out, recordbatch.Aborted{ProducerID: t.pid, FirstOffset: first})
			}
			delete(open, t.pid)
		}
	}
	return out
}

// read returns up to n committed records in [from, end).
func (l *fakeLog) read(from, end int64, n int) []*kgo.Record {
	from, end = max(from, l.start), min(end, l.end())
	var out []*kgo.Record
	for o := from; o < end && len(out) < n; o++ {
		if l.committed(o) {
			out = append(out, cloneRecord(l.recs[o-l.start]))
		}
	}
	return out
}

// batchAt is the stored batch that holds offset pos (cut at end),
// encoded as a broker serves it, and the offset after it.
func (l *fakeLog) batchAt(pos, end int64) (raw []byte, next int64) {
	first := pos
	for first > l.start && !l.starts[first] {
		first--
	}
	t, inTxn := l.txn[first]
	pos, next = first, first+1
	for next < end && !l.starts[next] {
		next++
	}
	var recs []*kgo.Record
	for o := pos; o < next; o++ {
		recs = append(recs, l.recs[o-l.start])
	}
	switch {
	case !inTxn:
		return encodeBatch(recs, 0, -1), next
	case t.marker == 0:
		return encodeBatch(recs, attrTransactional, t.pid), next
	}
	// A control record: its key is a version and the marker's type (0
	// abort, 1 commit); its value a version and the coordinator's epoch.
	typ := byte(1)
	if t.marker == txnAbort {
		typ = 0
	}
	marker := &kgo.Record{Offset: pos, Key: []byte{0, 0, 0, typ}, Value: []byte{0, 0, 0, 0, 0, 0}, Timestamp: recs[0].Timestamp}
	return encodeBatch([]*kgo.Record{marker}, attrTransactional|attrControl, t.pid), next
}

const (
	attrTransactional int16 = 0x10
	attrControl       int16 = 0x20
)

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
	// sourceFault fails Sources.Source; fetchTrouble is the fetches'
	// trouble (Fetch.Trouble).
	sourceFault, fetchTrouble error
	reads                     int // Records calls
	mirrorReads               int
	fetches                   []int64 // where each Fetch began
	changed                   chan struct{}
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
	for i := range n {
		l.append(rec(l.end()), i%fetchBatchRecords == 0)
	}
	s.wake()
}

// produceTxn appends a transaction of producer pid with n records and its
// marker (txnCommit, txnAbort; 0 leaves it open: endTxn ends it).
func (s *fakeSource) produceTxn(p int32, pid int64, n int, marker int8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.partitions[p]
	if l.txn == nil {
		l.txn = map[int64]txnEntry{}
	}
	for i := range n + 1 {
		if i == n && marker == 0 {
			break
		}
		o := l.end()
		l.append(rec(o), i%fetchBatchRecords == 0 || i == n)
		if i < n {
			l.txn[o] = txnEntry{pid: pid}
		} else {
			l.txn[o] = txnEntry{pid: pid, marker: marker}
		}
	}
	s.wake()
}

// endTxn appends the marker of producer pid's open transaction.
func (s *fakeSource) endTxn(p int32, pid int64, marker int8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.partitions[p]
	o := l.end()
	l.append(rec(o), true)
	l.txn[o] = txnEntry{pid: pid, marker: marker}
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
	end := l.end()
	if committed {
		end = l.lso()
	}
	return kafkaconn.PartitionOffsets{Start: l.start, End: end}, nil
}

func (s *fakeSource) Topic(_ context.Context, topic string) (SourceTopic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists || topic != s.topic {
		return SourceTopic{}, nil
	}
	return SourceTopic{Exists: true, ID: s.id, Partitions: len(s.partitions)}, nil
}

func (s *fakeSource) Spec(ctx context.Context, topic string) (TopicSpec, error) {
	st, err := s.Topic(ctx, topic)
	if err != nil {
		return TopicSpec{}, err
	}
	if !st.Exists {
		return TopicSpec{}, fmt.Errorf("source topic %s does not exist", topic)
	}
	return TopicSpec{Partitions: st.Partitions}, nil
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

// fetchBatchRecords is how many records the fake source stores in a
// batch, and fetchBatches how many batches the fetcher puts in a response.
const (
	fetchBatchRecords = 3
	fetchBatches      = 2
)

// Fetch delivers the partition's log from from on, up to its last stable
// offset, as real v2 record batches (recordbatch.Split of encoded bytes,
// markers and aborted transactions' records included, with the aborted
// transactions listed), a response at a time, and waits for more at the
// end; a position before the log's start is OFFSET_OUT_OF_RANGE, as a
// broker answers.
func (s *fakeSource) Fetch(topic string, partition int32, from int64, deliver func(FetchBatch)) (Fetch, error) {
	s.mu.Lock()
	s.fetches = append(s.fetches, from)
	s.mu.Unlock()
	f := &fakeFetch{src: s, stop: make(chan struct{}), done: make(chan struct{})}
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
			case pos < l.lso():
				lso := l.lso()
				fb = &FetchBatch{LSO: lso}
				var raw []byte
				first := pos
				for i := 0; i < fetchBatches && pos < lso; i++ {
					var b []byte
					b, pos = l.batchAt(pos, lso)
					raw = append(raw, b...)
				}
				bs, err := recordbatch.Split(raw)
				if err != nil {
					panic(err)
				}
				fb.Batches, fb.Aborted = bs, l.aborted(first, pos-1)
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
	src        *fakeSource
	once       sync.Once
	stop, done chan struct{}
}

// Trouble is the source's fetchTrouble, since a minute.
func (f *fakeFetch) Trouble() (time.Time, error) {
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	if f.src.fetchTrouble == nil {
		return time.Time{}, nil
	}
	return time.Now().Add(-time.Minute), f.src.fetchTrouble
}

func (f *fakeFetch) Stop() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// encodeBatch encodes records, at consecutive offsets, as a broker stores
// them: one uncompressed v2 batch with create-time timestamps, of producer
// pid (-1: none) with attributes attrs.
func encodeBatch(recs []*kgo.Record, attrs int16, pid int64) []byte {
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
	epoch, seq := int16(-1), int32(-1)
	if pid >= 0 {
		epoch = 0
		if attrs&attrControl == 0 {
			seq = int32(recs[0].Offset)
		}
	}
	b := kmsg.RecordBatch{FirstOffset: recs[0].Offset, PartitionLeaderEpoch: 1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: n - 1, FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: n, Records: body}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// decodeBatch is what a broker appends of a produced v2 batch: its records,
// their timestamps from the batch's first, and the batch's codec.
func decodeBatch(raw []byte) ([]*kgo.Record, recordbatch.Codec, error) {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return nil, 0, err
	}
	codec := recordbatch.Codec(b.Attributes & 0x07)
	data, err := kgo.DefaultDecompressor().Decompress(b.Records, kgo.CompressionCodecType(codec))
	if err != nil {
		return nil, 0, err
	}
	var out []*kgo.Record
	for range b.NumRecords {
		n, k := binary.Varint(data)
		if k <= 0 || int64(len(data)) < int64(k)+n {
			return nil, 0, errors.New("short record")
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:int64(k)+n]); err != nil {
			return nil, 0, err
		}
		data = data[int64(k)+n:]
		kr := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(b.FirstTimestamp + r.TimestampDelta64)}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		out = append(out, kr)
	}
	return out, codec, nil
}

// fakeDestination is the destination cluster's topics, and the producer's
// view of them (fakeCopy appends to its logs).
type fakeDestination struct {
	mu         sync.Mutex
	topics     map[string]map[int32]*fakeLog
	acl        map[string]bool
	enforces   bool
	created    []string
	recreated  []string
	reads      int
	offsetsErr error
	// changed is closed (and replaced) at every write to a log.
	changed chan struct{}
	// stall, when set, makes Offsets wait for its context to end; stalled
	// is closed when it does.
	stall   bool
	stalled chan struct{}
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

func (d *fakeDestination) Offsets(ctx context.Context, topic string, partition int32) (kafkaconn.PartitionOffsets, error) {
	d.mu.Lock()
	if d.stall {
		d.mu.Unlock()
		close(d.stalled)
		<-ctx.Done()
		return kafkaconn.PartitionOffsets{}, context.Cause(ctx)
	}
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

func (d *fakeDestination) EnsureTopic(ctx context.Context, dstTopic string, _ int16, spec func(context.Context) (TopicSpec, error)) (DestinationTopic, error) {
	d.mu.Lock()
	if t, ok := d.topics[dstTopic]; ok {
		d.mu.Unlock()
		return DestinationTopic{Partitions: len(t)}, nil
	}
	d.mu.Unlock()
	sp, err := spec(ctx)
	if err != nil {
		return DestinationTopic{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.createLocked(dstTopic, sp.Partitions)
	d.created = append(d.created, dstTopic)
	return DestinationTopic{Created: true, Partitions: sp.Partitions}, nil
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
// goroutine). failNext, when set, fails the next batch instead.
type fakeCopy struct {
	dst *fakeDestination
	mu  sync.Mutex
	// failNext fails the next batch only.
	failNext  error
	batches   int
	refreshed int
	// hold keeps the answers of the batches it appends (a slow
	// acknowledgement) until release; held are they, in order. Like kgo,
	// it fails them (in order, with the context's error) once their
	// context ends, and stops holding; stuck, it ignores the context too
	// (a client that never answers).
	hold, stuck bool
	held        []heldAnswer
	// closing is the done channel of the last Throttle: the session's,
	// closed when the worker closes the session.
	closing <-chan struct{}
	// recompress is the mirror's compression.type (Recompression), and
	// codecs counts the appended batches by codec.
	recompress *recordbatch.Codec
	codecs     map[recordbatch.Codec]int
	// throttled is how long each Throttle says it waited (it returns at
	// once).
	throttled time.Duration
	// trouble is the producer's trouble (ProducerTrouble); health is
	// closed by healthChanged.
	trouble error
	health  chan struct{}
}

// healthChanged tells the sessions that the clients' health changed.
func (c *fakeCopy) healthChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.health == nil {
		c.health = make(chan struct{})
	}
	close(c.health)
	c.health = make(chan struct{})
}

type heldAnswer struct {
	ctx     context.Context
	landed  func()
	promise func(batchproduce.Result)
}

// release answers the held batches, in order, and answers at once from
// then on.
func (c *fakeCopy) release() {
	c.mu.Lock()
	held := c.held
	c.hold, c.held = false, nil
	c.mu.Unlock()
	for _, h := range held {
		h.landed()
	}
}

// failHeld fails the held batches of ctx, once it has ended, as kgo fails
// the records whose context ended; later ones are answered at once.
func (c *fakeCopy) failHeld(ctx context.Context) {
	<-ctx.Done()
	c.mu.Lock()
	if c.stuck {
		c.mu.Unlock()
		return
	}
	var failed []heldAnswer
	c.held = slices.DeleteFunc(c.held, func(h heldAnswer) bool {
		if h.ctx == ctx {
			failed = append(failed, h)
			return true
		}
		return false
	})
	c.hold = false
	c.mu.Unlock()
	for _, h := range failed {
		h.promise(batchproduce.Result{Err: ctx.Err()})
	}
}

func (c *fakeCopy) Produce(ctx context.Context, topic string, partition int32, b batchproduce.Payload, promise func(batchproduce.Result)) {
	c.mu.Lock()
	c.batches++
	if c.codecs == nil {
		c.codecs = map[recordbatch.Codec]int{}
	}
	perr := c.failNext
	c.failNext = nil
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
	recs, codec, err := decodeBatch(b.Produced(1, 0, 0))
	if err != nil {
		promise(batchproduce.Result{Err: err})
		return
	}
	if int32(len(recs)) != b.Records() {
		promise(batchproduce.Result{Err: fmt.Errorf("batch says %d records, holds %d", b.Records(), len(recs))})
		return
	}
	c.mu.Lock()
	c.codecs[codec]++
	c.mu.Unlock()
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
	landed := func() { promise(batchproduce.Result{BaseOffset: base}) }
	c.mu.Lock()
	if c.hold {
		if !slices.ContainsFunc(c.held, func(h heldAnswer) bool { return h.ctx == ctx }) {
			go c.failHeld(ctx)
		}
		c.held = append(c.held, heldAnswer{ctx: ctx, landed: landed, promise: promise})
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	landed()
}

func (c *fakeCopy) ProducerTrouble(string, int32) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trouble == nil {
		return time.Time{}, nil
	}
	return time.Now().Add(-time.Minute), c.trouble
}

func (c *fakeCopy) RefreshProducerMetadata() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshed++
}

func (c *fakeCopy) Recompression(string) (recordbatch.Codec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recompress == nil {
		return 0, false
	}
	return *c.recompress, true
}

func (c *fakeCopy) Throttle(_ context.Context, done <-chan struct{}, _ lease.Key, _ func() int64) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = done
	return c.throttled, nil
}

func (c *fakeCopy) HealthChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.health == nil {
		c.health = make(chan struct{})
	}
	return c.health
}

// fakeWatch is DestinationWatch: AwaitSettled answers at once; Watch hands
// the running session a channel the test interrupts it on; TakeLoss
// returns the loss the test set.
type fakeWatch struct {
	mu       sync.Mutex
	watching map[lease.Key]chan Interruption
	watched  chan struct{} // closed at each Watch
	losses   map[lease.Key]Loss
	// unanswered, when set, is how many copies of an earlier session
	// AwaitSettled finds unanswered once (it says so to waiting, then
	// they are answered).
	unanswered int64
	// unsettledEnds are the ends KeepUnsettled was handed.
	unsettledEnds []int64
	writtenOff    []string
}

func newFakeWatch() *fakeWatch {
	return &fakeWatch{watching: map[lease.Key]chan Interruption{}, watched: make(chan struct{}), losses: map[lease.Key]Loss{}}
}

func (f *fakeWatch) AwaitSettled(_ context.Context, _ lease.Key, waiting func(int64, time.Time)) error {
	f.mu.Lock()
	n := f.unanswered
	if waiting != nil {
		f.unanswered = 0
	}
	f.mu.Unlock()
	if n > 0 && waiting != nil {
		waiting(n, time.Now())
	}
	return nil
}

// KeepUnsettled records the end of the copies handed over.
func (f *fakeWatch) KeepUnsettled(_ lease.Key, _ string, _ *batchproduce.Acks, end int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsettledEnds = append(f.unsettledEnds, end)
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
