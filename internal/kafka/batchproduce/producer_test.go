package batchproduce_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/recordbatch"
)

const partitions = 6

// world is a three-broker destination with topic "t" of six partitions,
// and a producer over it.
type world struct {
	cluster *kfake.Cluster
	cl      *kgo.Client
	p       *batchproduce.Producer
}

func newWorld(t *testing.T) *world {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p, err := batchproduce.New(batchproduce.Config{Client: cl, RetryBackoff: 20 * time.Millisecond, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &world{cluster: c, cl: cl, p: p}
}

// batch is an uncompressed batch of n records whose values name the
// partition and the record's number, as a source broker would send it.
func batch(t *testing.T, partition int32, first, n int) *recordbatch.Batch {
	t.Helper()
	var raw []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: fmt.Appendf(nil, "p%d-%d", partition, first+i)}
		body := r.AppendTo(nil)[1:] // the zero length is one byte
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	b := kmsg.RecordBatch{FirstOffset: int64(first), Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1000,
		MaxTimestamp: 1000 + int64(n), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: raw}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	got, err := recordbatch.Split(out)
	if err != nil || len(got) != 1 {
		t.Fatalf("split: %v", err)
	}
	return &got[0]
}

// results collects each partition's results in the order promised.
type results struct {
	mu  sync.Mutex
	got map[int32][]batchproduce.Result
	n   int
}

func (r *results) promise(p int32) func(batchproduce.Result) {
	return func(res batchproduce.Result) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.got == nil {
			r.got = map[int32][]batchproduce.Result{}
		}
		r.got[p] = append(r.got[p], res)
		r.n++
	}
}

func (r *results) wait(t *testing.T, n int) map[int32][]batchproduce.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		done := r.n >= n
		got := map[int32][]batchproduce.Result{}
		for p, l := range r.got {
			got[p] = slices.Clone(l)
		}
		r.mu.Unlock()
		if done {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d results after 20s", r.n, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// values reads partition p of "t" to its end.
func values(t *testing.T, cl *kgo.Client, p int32) []string {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("t", p)
	if end.Offset == 0 {
		return nil
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []string
	for int64(len(out)) < end.Offset {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of partition %d", len(out), end.Offset, p)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(out)) {
				t.Errorf("partition %d: record at %d, want %d", p, r.Offset, len(out))
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}

func want(p int32, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%d-%d", p, i)
	}
	return out
}

// TestProduceKeepsEachPartitionsOrder: batches queued fast for every
// partition land once each, in order, at the offsets their results say,
// while a partition's leader moves to another broker midway.
func TestProduceKeepsEachPartitionsOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const batches, per = 40, 10
	var r results
	for i := range batches {
		if i == batches/2 {
			if err := w.cluster.MoveTopicPartition("t", 2, (w.cluster.LeaderFor("t", 2)+1)%3); err != nil {
				t.Fatal(err)
			}
		}
		for p := range int32(partitions) {
			w.p.Produce(t.Context(), "t", p, batch(t, p, i*per, per), r.promise(p))
		}
	}
	got := r.wait(t, batches*partitions)
	for p := range int32(partitions) {
		for i, res := range got[p] {
			if res.Err != nil || res.BaseOffset != int64(i*per) {
				t.Fatalf("partition %d, batch %d: %+v, want base offset %d", p, i, res, i*per)
			}
		}
		if v := values(t, w.cl, p); !slices.Equal(v, want(p, batches*per)) {
			t.Fatalf("partition %d holds %d records, out of order or twice: %v", p, len(v), v[:min(len(v), 20)])
		}
	}
}

// TestEndedContextFailsTheRest: a batch whose context has ended is not sent,
// nor any batch after it; what landed is a prefix of what was queued.
func TestEndedContextFailsTheRest(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := errors.New("the session ended")
	var r results
	for i := range 200 {
		if i == 100 {
			cancel(stop)
		}
		w.p.Produce(ctx, "t", 0, batch(t, 0, i*5, 5), r.promise(0))
	}
	got := r.wait(t, 200)[0]
	ok := 0
	for ok < len(got) && got[ok].Err == nil {
		ok++
	}
	for _, res := range got[ok:] {
		if !errors.Is(res.Err, stop) && !errors.Is(res.Err, batchproduce.ErrEarlierFailed) {
			t.Fatalf("after the context ended: %v", res.Err)
		}
	}
	if ok > 100 {
		t.Fatalf("%d batches landed, more than the 100 queued before the context ended", ok)
	}
	if v := values(t, w.cl, 0); !slices.Equal(v, want(0, ok*5)) {
		t.Fatalf("the partition holds %d records, want the %d of the %d batches that succeeded", len(v), ok*5, ok)
	}
	// The partition goes on after the failures, from where it stopped.
	var again results
	w.p.Produce(t.Context(), "t", 0, batch(t, 0, ok*5, 5), again.promise(0))
	if res := again.wait(t, 1)[0][0]; res.Err != nil || res.BaseOffset != int64(ok*5) {
		t.Fatalf("a batch after the failures: %+v", res)
	}
}

// TestRefusedBatchFailsTheQueueAndTheProducerGoesOn: a batch the broker
// refuses (its sequence out of order) fails with every batch queued behind
// it; the producer takes a new epoch and the partition's next batches land
// after the last good one.
func TestRefusedBatchFailsTheQueueAndTheProducerGoesOn(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var first results
	w.p.Produce(t.Context(), "t", 1, batch(t, 1, 0, 5), first.promise(1))
	first.wait(t, 1)
	// The next produce request that carries partition 1 is refused.
	w.cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.OutOfOrderSequenceNumber.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var r results
	for i := range 5 {
		w.p.Produce(t.Context(), "t", 1, batch(t, 1, 5+i*5, 5), r.promise(1))
	}
	got := r.wait(t, 5)[1]
	if !errors.Is(got[0].Err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("the refused batch: %v", got[0].Err)
	}
	for _, res := range got[1:] {
		if res.Err == nil {
			t.Fatalf("a batch queued behind the refused one landed: %+v", got)
		}
	}
	var after results
	w.p.Produce(t.Context(), "t", 1, batch(t, 1, 5, 5), after.promise(1))
	w.p.Produce(t.Context(), "t", 1, batch(t, 1, 10, 5), after.promise(1))
	res := after.wait(t, 2)[1]
	if res[0].Err != nil || res[0].BaseOffset != 5 || res[1].Err != nil || res[1].BaseOffset != 10 {
		t.Fatalf("after the refusal: %+v", res)
	}
	if v := values(t, w.cl, 1); !slices.Equal(v, want(1, 15)) {
		t.Fatalf("partition 1 holds %v", v)
	}
}

// TestDroppedConnectionIsRetried: a request the broker never answers (its
// connection closes) is sent again with the same sequence, and lands once.
func TestDroppedConnectionIsRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dropped := 0
	w.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		w.cluster.KeepControl()
		if dropped++; dropped > 3 {
			return nil, nil, false // the broker handles it
		}
		return nil, errors.New("connection dropped"), true
	})
	var r results
	for i := range 10 {
		w.p.Produce(t.Context(), "t", 3, batch(t, 3, i*4, 4), r.promise(3))
	}
	for i, res := range r.wait(t, 10)[3] {
		if res.Err != nil || res.BaseOffset != int64(i*4) {
			t.Fatalf("batch %d: %+v", i, res)
		}
	}
	if v := values(t, w.cl, 3); !slices.Equal(v, want(3, 40)) {
		t.Fatalf("partition 3 holds %v", v)
	}
}

// TestUnansweredBatchIsSentAgainAfterItsContextEnds: a batch whose request
// went unanswered may be in the log, so, like a copy in flight, it is not
// cancelled when its context ends: it is sent again until the broker
// answers, lands once, and the next batch follows it. A batch not yet sent
// whose context ended is never sent (TestEndedContextFailsTheRest).
func TestUnansweredBatchIsSentAgainAfterItsContextEnds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	w.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		// The session ends after the request failed, while the batch
		// waits to be sent again (20 ms).
		time.AfterFunc(5*time.Millisecond, func() { cancel(errors.New("the session ended")) })
		return nil, errors.New("connection dropped"), true
	})
	var r results
	w.p.Produce(ctx, "t", 4, batch(t, 4, 0, 5), r.promise(4))
	if res := r.wait(t, 1)[4][0]; res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("the unanswered batch: %+v, want it sent again and landed at 0", res)
	}
	var next results
	w.p.Produce(t.Context(), "t", 4, batch(t, 4, 5, 5), next.promise(4))
	if res := next.wait(t, 1)[4][0]; res.Err != nil || res.BaseOffset != 5 {
		t.Fatalf("the next batch: %+v, want it at offset 5", res)
	}
	if v := values(t, w.cl, 4); !slices.Equal(v, want(4, 10)) {
		t.Fatalf("partition 4 holds %v", v)
	}
}

// TestPromisesKeepThePartitionsOrder: a partition's promises run one at a
// time and in its order, though the success of a batch in flight and the
// failure of the one queued behind it (its context ended) are decided by
// two goroutines one right after the other.
func TestPromisesKeepThePartitionsOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// Other partitions keep the producer dispatching, as a busy engine's
	// do, so that a dispatch can run between the two decisions.
	busy, stop := context.WithCancel(t.Context())
	defer stop()
	go func() {
		for i := 0; busy.Err() == nil; i++ {
			w.p.Produce(busy, "t", int32(i%4), batch(t, int32(i%4), i, 1), func(batchproduce.Result) {})
			time.Sleep(50 * time.Microsecond)
		}
	}()
	for i := range 200 {
		var mu sync.Mutex
		var order []string
		note := func(what string) func(batchproduce.Result) {
			return func(batchproduce.Result) {
				mu.Lock()
				order = append(order, what)
				mu.Unlock()
			}
		}
		ended, cancel := context.WithCancel(t.Context())
		w.p.Produce(t.Context(), "t", 5, batch(t, 5, i*2, 1), note("first"))
		w.p.Produce(ended, "t", 5, batch(t, 5, i*2+1, 1), note("second"))
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(order)
			mu.Unlock()
			if n == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of 2 promises", i, n)
			}
			time.Sleep(time.Millisecond)
		}
		if !slices.Equal(order, []string{"first", "second"}) {
			t.Fatalf("round %d: promises ran %v", i, order)
		}
	}
}

// refuseProduce answers a produce request with code for every partition it
// carries, throttling the connection for throttle.
func refuseProduce(req kmsg.Request, code int16, throttle time.Duration) kmsg.Response {
	pr := req.(*kmsg.ProduceRequest)
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	resp.ThrottleMillis = int32(throttle.Milliseconds())
	for _, rt := range pr.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// TestThrottledRefusalIsRetriedAfterTheThrottle: a batch refused with an
// error that kerr calls retriable (THROTTLING_QUOTA_EXCEEDED, which no
// hand-written list of ours named) is sent again and lands once, and the
// answer's throttle time (KIP-219) holds the next request on that
// connection back: kgo waits it out, not the producer's 20 ms backoff.
func TestThrottledRefusalIsRetriedAfterTheThrottle(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const throttle = 600 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	w.cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		w.cluster.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if acks := req.(*kmsg.ProduceRequest).Acks; acks != -1 {
			t.Errorf("a produce request with acks %d; every copy waits for all in-sync replicas (-1)", acks)
		}
		if len(at) == 1 {
			return refuseProduce(req, kerr.ThrottlingQuotaExceeded.Code, throttle), nil, true
		}
		return nil, nil, false
	})
	var r results
	w.p.Produce(t.Context(), "t", 2, batch(t, 2, 0, 5), r.promise(2))
	if res := r.wait(t, 1)[2][0]; res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("the throttled batch: %+v, want it sent again and landed at 0", res)
	}
	mu.Lock()
	gap := at[1].Sub(at[0])
	mu.Unlock()
	if gap < throttle-50*time.Millisecond {
		t.Fatalf("the retry came %s after a refusal throttled for %s", gap, throttle)
	}
	if v := values(t, w.cl, 2); !slices.Equal(v, want(2, 5)) {
		t.Fatalf("partition 2 holds %v", v)
	}
}

// TestCorruptMessageIsNotRetried: CORRUPT_MESSAGE is retriable to kerr,
// but the same bytes would be refused again (kgo's producer makes the same
// exception): the batch fails at once, and the rest of its queue with it.
func TestCorruptMessageIsNotRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var refused atomic.Int64
	w.cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		w.cluster.KeepControl()
		refused.Add(1)
		return refuseProduce(req, kerr.CorruptMessage.Code, 0), nil, true
	})
	var r results
	w.p.Produce(t.Context(), "t", 0, batch(t, 0, 0, 5), r.promise(0))
	w.p.Produce(t.Context(), "t", 0, batch(t, 0, 5, 5), r.promise(0))
	got := r.wait(t, 2)[0]
	if !errors.Is(got[0].Err, kerr.CorruptMessage) || !errors.Is(got[1].Err, batchproduce.ErrEarlierFailed) {
		t.Fatalf("results %+v", got)
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("%d produce requests, want the one refused", n)
	}
}

// TestRetriesBackOffAndAreReported: a partition whose broker answers with
// an error it retries (here NOT_ENOUGH_REPLICAS: the request succeeds, so
// only the producer knows) is retried at growing intervals, RetryBackoff
// doubled each time up to MaxRetryBackoff, and Retrying says since when
// and why until a send is answered; then it says nothing.
func TestRetriesBackOffAndAreReported(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var (
		mu    sync.Mutex
		times []time.Time
	)
	const refusals = 6
	w.cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		w.cluster.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if len(times) >= refusals {
			return nil, nil, false
		}
		times = append(times, time.Now())
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.NotEnoughReplicas.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	var r results
	w.p.Produce(t.Context(), "t", 2, batch(t, 2, 0, 3), r.promise(2))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(times)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the broker was not asked twice")
		}
		time.Sleep(time.Millisecond)
	}
	if since, err := w.p.Retrying("t", 2); since.IsZero() || !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("Retrying while refused: %v, %v; want since when and NOT_ENOUGH_REPLICAS", since, err)
	}
	if res := r.wait(t, 1)[2][0]; res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("the batch: %+v, want it landed at 0", res)
	}
	mu.Lock()
	defer mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]))
	}
	t.Logf("gaps between sends: %v", gaps)
	// 20 ms doubled: 20, 40, 80, 160, 320; each at least its backoff.
	for i, g := range gaps {
		if want := 20 * time.Millisecond << i; g < want {
			t.Errorf("retry %d came after %s, want at least %s", i+1, g, want)
		}
	}
	if since, err := w.p.Retrying("t", 2); !since.IsZero() || err != nil {
		t.Fatalf("Retrying once answered: %v, %v; want nothing", since, err)
	}
}
