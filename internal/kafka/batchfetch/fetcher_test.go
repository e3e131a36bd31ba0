package batchfetch_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/batchfetch"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/testing/fetchanswer"
)

// source is a three-broker cluster with topic "t" of n partitions.
type source struct {
	c  *kfake.Cluster
	cl *kgo.Client
}

func newSource(t *testing.T, partitions int32) *source {
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
	return &source{c: c, cl: cl}
}

// produce writes n records to partition p in batches of per, numbered from
// first, with codec; txn names a transaction it commits or aborts.
func (s *source) produce(t *testing.T, p int32, first, n, per int, codec kgo.CompressionCodec, txn string, commit bool) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(s.c.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec), kgo.ManualFlushing()}
	if txn != "" {
		opts = append(opts, kgo.TransactionalID(txn))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := t.Context()
	if txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	for i := first; i < first+n; i += per {
		for j := i; j < min(i+per, first+n); j++ {
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d %0200d", p, j, 0)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if txn != "" {
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
}

// collector keeps what a partition's deliveries brought.
// addCollected adds partitions 0 to n-1 of topic t from offset 0, each
// delivering to a collector of its own.
func addCollected(f *batchfetch.Fetcher, n int32) []*collector {
	cols := make([]*collector, n)
	for p := range n {
		cols[p] = &collector{}
		f.Add("t", p, 0, cols[p].deliver)
	}
	return cols
}

type collector struct {
	mu      sync.Mutex
	batches []recordbatch.Batch
	kept    []recordbatch.Batch // what read_committed keeps
	lso     int64
	err     error
	calls   atomic.Int64
}

func (c *collector) deliver(f batchfetch.Fetched) {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.Err != nil {
		c.err = f.Err
		return
	}
	c.lso = f.LastStableOffset
	keep := recordbatch.NewCommitted(f.Aborted)
	for _, b := range f.Batches {
		c.batches = append(c.batches, b)
		if ok, err := keep.Keep(&b); err != nil {
			c.err = err
		} else if ok {
			c.kept = append(c.kept, b)
		}
	}
}

// next is the offset after the last batch delivered.
func (c *collector) next() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.batches); n > 0 {
		return c.batches[n-1].NextOffset()
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newFetcher(t *testing.T, s *source) *batchfetch.Fetcher {
	t.Helper()
	f, err := batchfetch.New(batchfetch.Config{Client: s.cl, MaxWait: 100 * time.Millisecond, RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// contiguous checks that batches cover [0, end) once each, in order.
func contiguous(t *testing.T, p int32, batches []recordbatch.Batch, end int64) {
	t.Helper()
	at := int64(0)
	for _, b := range batches {
		if b.BaseOffset != at {
			t.Fatalf("partition %d: a batch at %d, want %d", p, b.BaseOffset, at)
		}
		at = b.NextOffset()
	}
	if at != end {
		t.Fatalf("partition %d: batches end at %d, want %d", p, at, end)
	}
}

// TestFetchesEveryBatchOnce: every partition's batches arrive once each,
// in order and with their codecs, while more are written, and while one
// partition's leader moves to another broker.
func TestFetchesEveryBatchOnce(t *testing.T) {
	t.Parallel()
	s := newSource(t, 6)
	f := newFetcher(t, s)
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.ZstdCompression()}
	cols := make([]*collector, 6)
	for p := range int32(6) {
		cols[p] = &collector{}
		s.produce(t, p, 0, 50, 10, codecs[p], "", false)
		f.Add("t", p, 0, cols[p].deliver)
	}
	waitFor(t, "the first 50 records of each partition", func() bool {
		for _, c := range cols {
			if c.next() < 50 {
				return false
			}
		}
		return true
	})
	if err := s.c.MoveTopicPartition("t", 4, (s.c.LeaderFor("t", 4)+1)%3); err != nil {
		t.Fatal(err)
	}
	for p := range int32(6) {
		s.produce(t, p, 50, 50, 10, codecs[p], "", false)
	}
	waitFor(t, "all 100 records of each partition", func() bool {
		for _, c := range cols {
			if c.next() < 100 {
				return false
			}
		}
		return true
	})
	for p, c := range cols {
		c.mu.Lock()
		contiguous(t, int32(p), c.batches, 100)
		for _, b := range c.batches {
			if got := b.Codec(); int(got) != codecIndex(p) {
				t.Fatalf("partition %d: a %s batch, want %s", p, got, recordbatch.Codec(codecIndex(p)))
			}
		}
		c.mu.Unlock()
	}
}

// codecIndex is the codec TestFetchesEveryBatchOnce writes partition p with.
func codecIndex(p int) int { return []int{0, 1, 2, 3, 4, 4}[p] }

// TestQuietPartitionsAreNotAsked: once the session holds them, requests
// name only the partitions whose position moved: 200 quiet partitions and
// one that gets a record a few times cost a handful of partitions per
// request.
func TestQuietPartitionsAreNotAsked(t *testing.T) {
	t.Parallel()
	s := newSource(t, 201)
	var mu sync.Mutex
	var sizes []int // partitions named per fetch request
	s.c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		n := 0
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			n += len(t.Partitions)
		}
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		return nil, nil, false
	})
	f := newFetcher(t, s)
	cols := addCollected(f, 201)
	waitFor(t, "the session holding every partition", func() bool {
		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, n := range sizes {
			total += n
		}
		return total >= 201 && len(sizes) >= 3
	})
	mu.Lock()
	sizes = nil
	mu.Unlock()
	for i := range 5 {
		s.produce(t, 7, i, 1, 1, kgo.NoCompression(), "", false)
		waitFor(t, "the record", func() bool { return cols[7].next() == int64(i+1) })
	}
	mu.Lock()
	defer mu.Unlock()
	// Each record is its own response; the first may answer a long poll
	// sent before the count restarted.
	if len(sizes) < 4 {
		t.Fatalf("%d fetch requests for 5 records", len(sizes))
	}
	for _, n := range sizes {
		if n > 1 {
			t.Fatalf("requests named %v partitions; a session should name only the one that moved", sizes)
		}
	}
	for p, c := range cols {
		if p != 7 && c.next() != 0 {
			t.Fatalf("partition %d got batches", p)
		}
	}
}

// TestReadCommitted: a transactional partition's aborted transactions are
// listed with the response, so the kept batches are the committed ones.
func TestReadCommitted(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	f := newFetcher(t, s)
	for i, commit := range []bool{true, false, true} {
		s.produce(t, 0, i*10, 10, 5, kgo.ZstdCompression(), fmt.Sprintf("%s-%d", t.Name(), i), commit)
	}
	var c collector
	f.Add("t", 0, 0, c.deliver)
	// Three transactions of two batches and a marker each.
	waitFor(t, "every batch up to the last marker", func() bool { return c.next() >= 33 })
	c.mu.Lock()
	defer c.mu.Unlock()
	// Each transaction wrote 10 records and a marker: the committed ones
	// are offsets 0-9 and 22-31.
	var kept []int64
	for _, b := range c.kept {
		for o := b.BaseOffset; o < b.NextOffset(); o++ {
			kept = append(kept, o)
		}
	}
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}
	if !slices.Equal(kept, want) {
		t.Fatalf("kept offsets %v, want those of the two committed transactions %v", kept, want)
	}
}

// TestReadCommittedInPieces: with every batch handed over as a piece of
// its own, each piece lists only the aborted transactions still open, so a
// producer's committed transaction after its aborted one is kept.
func TestReadCommittedInPieces(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	f, err := batchfetch.New(batchfetch.Config{Client: s.cl, MaxWait: 100 * time.Millisecond, PieceBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	// One transactional id: the same producer aborts, then commits.
	for i, commit := range []bool{true, false, true, false, true} {
		s.produce(t, 0, i*10, 10, 5, kgo.NoCompression(), t.Name(), commit)
	}
	var c collector
	f.Add("t", 0, 0, c.deliver)
	waitFor(t, "every batch up to the last marker", func() bool { return c.next() >= 55 })
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.calls.Load(); n < 15 {
		t.Fatalf("%d deliveries of 15 batches, want one a batch", n)
	}
	var kept []int64
	for _, b := range c.kept {
		for o := b.BaseOffset; o < b.NextOffset(); o++ {
			kept = append(kept, o)
		}
	}
	var want []int64
	for _, txn := range []int64{0, 2, 4} { // 11 offsets each, the last a marker
		for o := range int64(10) {
			want = append(want, txn*11+o)
		}
	}
	if !slices.Equal(kept, want) {
		t.Fatalf("kept offsets %v, want those of the three committed transactions %v", kept, want)
	}
}

// TestOutOfRangeIsDelivered: a position past the partition's end is
// delivered as the partition's error, and the partition is not fetched
// again until it is added again.
func TestOutOfRangeIsDelivered(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	f := newFetcher(t, s)
	s.produce(t, 0, 0, 5, 5, kgo.NoCompression(), "", false)
	var c collector
	f.Add("t", 0, 100, c.deliver)
	waitFor(t, "the error", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	})
	if !errors.Is(c.err, kerr.OffsetOutOfRange) {
		t.Fatalf("error %v, want OFFSET_OUT_OF_RANGE", c.err)
	}
	calls := c.calls.Load()
	time.Sleep(300 * time.Millisecond)
	if c.calls.Load() != calls {
		t.Fatal("the partition was fetched again after its error")
	}
	var again collector
	f.Add("t", 0, 0, again.deliver)
	waitFor(t, "the records after adding it again", func() bool { return again.next() == 5 })
}

// TestRemoveStopsDeliveries: once Remove returns, the partition's deliver
// is not called, though more records come.
func TestRemoveStopsDeliveries(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	f := newFetcher(t, s)
	var c collector
	f.Add("t", 0, 0, c.deliver)
	s.produce(t, 0, 0, 5, 5, kgo.NoCompression(), "", false)
	waitFor(t, "the first records", func() bool { return c.next() == 5 })
	f.Remove("t", 0)
	calls := c.calls.Load()
	s.produce(t, 0, 5, 5, 5, kgo.NoCompression(), "", false)
	time.Sleep(300 * time.Millisecond)
	if c.calls.Load() != calls {
		t.Fatal("a delivery after Remove returned")
	}
	if got := c.next(); got != 5 {
		t.Fatalf("batches up to %d after Remove", got)
	}
}

// TestQuietRoundsKeepFetching: responses that bring nothing change nothing
// the next request would name, and the session is still asked: records
// written after several empty long polls arrive, on partitions that had
// data before and on ones that never had.
func TestQuietRoundsKeepFetching(t *testing.T) {
	t.Parallel()
	s := newSource(t, 3)
	var fetches atomic.Int64
	s.c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	f := newFetcher(t, s)
	cols := addCollected(f, 3)
	s.produce(t, 0, 0, 1, 1, kgo.NoCompression(), "", false)
	waitFor(t, "the first record", func() bool { return cols[0].next() == 1 })
	after := fetches.Load()
	waitFor(t, "four more fetches, empty ones", func() bool { return fetches.Load() >= after+4 })
	s.produce(t, 0, 1, 1, 1, kgo.NoCompression(), "", false)
	s.produce(t, 2, 0, 1, 1, kgo.NoCompression(), "", false)
	waitFor(t, "the records after the quiet spell", func() bool { return cols[0].next() == 2 && cols[2].next() == 1 })
}

// TestAddedPartitionDoesNotWaitOutALongPoll: a partition added while its
// broker's loop long-polls quiet partitions (2 s here) has its records
// delivered at once, by a fetch of its own, and then goes on in the loop's
// session: a resumed or taken-over partition would otherwise wait up to
// the whole wait for its first records.
func TestAddedPartitionDoesNotWaitOutALongPoll(t *testing.T) {
	t.Parallel()
	s := newSource(t, 6)
	const wait = 2 * time.Second
	side, err := kgo.NewClient(kgo.SeedBrokers(s.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(side.Close)
	f, err := batchfetch.New(batchfetch.Config{Client: s.cl, SideClient: side, MaxWait: wait, RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	// Every partition but 3 is quiet; the loops settle into long polls.
	quiet := &collector{}
	for p := range int32(6) {
		if p != 3 {
			f.Add("t", p, 0, quiet.deliver)
		}
	}
	time.Sleep(300 * time.Millisecond)
	s.produce(t, 3, 0, 50, 10, kgo.NoCompression(), "", false)
	for round := range 3 {
		added := &collector{}
		start := time.Now()
		f.Add("t", 3, 0, added.deliver)
		waitFor(t, "partition 3's records", func() bool { return added.next() == int64(50+round*5) })
		if took := time.Since(start); took > wait/2 {
			t.Fatalf("round %d: the added partition's records came after %s, a long poll's %s", round, took, wait)
		}
		// Then it is the loop's: a record written later arrives too.
		s.produce(t, 3, 50+round*5, 5, 5, kgo.NoCompression(), "", false)
		waitFor(t, "a later record of partition 3", func() bool { return added.next() == int64(55+round*5) })
		contiguous(t, 3, added.batches, int64(55+round*5))
		f.Remove("t", 3)
	}
	if quiet.next() != 0 {
		t.Fatal("a quiet partition got batches")
	}
}

// TestThrottledFetchHoldsTheNextBack: a fetch answered with a throttle
// time (KIP-219: the broker answers at once and expects the client to
// wait) holds the loop's next request back for that long; then the records
// come as usual.
func TestThrottledFetchHoldsTheNextBack(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	s.produce(t, 0, 0, 10, 5, kgo.NoCompression(), "", false)
	const throttle = 600 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	s.c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) == 1 {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ThrottleMillis = int32(throttle.Milliseconds())
			return resp, nil, true
		}
		return nil, nil, false
	})
	f := newFetcher(t, s)
	cols := addCollected(f, 1)
	waitFor(t, "the records", func() bool { return cols[0].next() == 10 })
	mu.Lock()
	defer mu.Unlock()
	if gap := at[1].Sub(at[0]); gap < throttle-50*time.Millisecond {
		t.Fatalf("the fetch after a throttled one came %s later, throttled for %s", gap, throttle)
	}
}

// answerDiverging makes the source answer the first fetch that asks for
// partition 0 of "t" at offset at with a diverging epoch (KIP-320), as a
// leader whose log was truncated would, and reports the LastFetchedEpoch
// that fetch named.
func answerDiverging(s *source, at int64, d kmsg.FetchResponseTopicPartitionDivergingEpoch) <-chan int32 {
	named := make(chan int32, 1)
	done := false
	s.c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		if done {
			return nil, nil, false
		}
		fr := req.(*kmsg.FetchRequest)
		for _, rt := range fr.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition != 0 || rp.FetchOffset != at {
					continue
				}
				done = true
				named <- rp.LastFetchedEpoch
				return fetchanswer.One(fr, rt, 0, func(sp *kmsg.FetchResponseTopicPartition) {
					sp.HighWatermark, sp.LastStableOffset, sp.DivergingEpoch = at, at, d
				}), nil, true
			}
		}
		return nil, nil, false
	})
	return named
}

// TestTruncatedSourceLogStopsThePartition: each fetch names the leader
// epoch of the last batch read, and a leader that answers that the epoch
// ends before the position (its log was truncated under the reader) stops
// the partition with a TruncatedError naming where: nothing past the
// divergence is delivered.
func TestTruncatedSourceLogStopsThePartition(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	s.produce(t, 0, 0, 10, 5, kgo.NoCompression(), "", false)
	f := newFetcher(t, s)
	cols := addCollected(f, 1)
	waitFor(t, "the first records", func() bool { return cols[0].next() == 10 })
	cols[0].mu.Lock()
	epoch := cols[0].batches[len(cols[0].batches)-1].LeaderEpoch
	cols[0].mu.Unlock()
	named := answerDiverging(s, 10, kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: epoch, EndOffset: 6})
	s.produce(t, 0, 10, 5, 5, kgo.NoCompression(), "", false)
	select {
	case got := <-named:
		if epoch < 0 || got != epoch {
			t.Fatalf("the fetch at offset 10 named epoch %d; the last batch read was appended in epoch %d", got, epoch)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no fetch at offset 10")
	}
	waitFor(t, "the truncation", func() bool {
		cols[0].mu.Lock()
		defer cols[0].mu.Unlock()
		return cols[0].err != nil
	})
	var trunc *batchfetch.TruncatedError
	if !errors.As(cols[0].err, &trunc) || trunc.EndOffset != 6 || trunc.Position != 10 {
		t.Fatalf("error %v, want a truncation at 6 below position 10", cols[0].err)
	}
	time.Sleep(300 * time.Millisecond) // three polls' worth: nothing more may come
	if n := cols[0].next(); n != 10 {
		t.Fatalf("batches up to offset %d delivered after the truncation", n)
	}
}

// TestDivergingEpochPastThePositionIsNoTruncation: a leader whose log ends
// the epoch asked for at or past the position lost nothing that was read:
// the partition is asked for again and its records come.
func TestDivergingEpochPastThePositionIsNoTruncation(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	s.produce(t, 0, 0, 10, 5, kgo.NoCompression(), "", false)
	f := newFetcher(t, s)
	cols := addCollected(f, 1)
	waitFor(t, "the first records", func() bool { return cols[0].next() == 10 })
	named := answerDiverging(s, 10, kmsg.FetchResponseTopicPartitionDivergingEpoch{Epoch: 0, EndOffset: 10})
	s.produce(t, 0, 10, 5, 5, kgo.NoCompression(), "", false)
	<-named
	waitFor(t, "the records after it", func() bool { return cols[0].next() == 15 })
	cols[0].mu.Lock()
	defer cols[0].mu.Unlock()
	if cols[0].err != nil {
		t.Fatal(cols[0].err)
	}
}

// TestHastyEmptyAnswersBackOff: a broker that answers every fetch at once
// with no record (an honest one holds it for the max wait) does not make
// the loop spin: its requests are spaced out, doubling up to the max wait.
func TestHastyEmptyAnswersBackOff(t *testing.T) {
	t.Parallel()
	s := newSource(t, 1)
	var fetches atomic.Int64
	s.c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		fetches.Add(1)
		return req.(*kmsg.FetchRequest).ResponseKind(), nil, true
	})
	f := newFetcher(t, s)
	addCollected(f, 1)
	waitFor(t, "the first fetch", func() bool { return fetches.Load() > 0 })
	start, from := time.Now(), fetches.Load()
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	<-deadline.C
	// With a 100 ms max wait: about 1+2+...+64 ms, then 100 ms apart.
	if n := fetches.Load() - from; n > 40 {
		t.Fatalf("%d fetches in %v from a broker that answers at once with nothing; want them spaced out", n, time.Since(start))
	} else {
		t.Logf("%d fetches in %v", n, time.Since(start).Round(time.Millisecond))
	}
}
