package partition

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/runtime/kafkaconn"
)

// recordingSink collects the offsets a sink is handed.
type recordingSink struct {
	mu      sync.Mutex
	offsets []int64
}

func (r *recordingSink) sink() *fetchSink {
	return &fetchSink{deliver: func(b fetchBatch) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rec := range b.records {
			r.offsets = append(r.offsets, rec.Offset)
		}
	}}
}

func (r *recordingSink) got() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.offsets)
}

func offsetRange(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestMirrorFetcherParksRemovedPartitions: a removed partition stays in the
// client, paused, so its neighbours' fetches go on; added back where it
// stopped it resumes, added back elsewhere it starts over from there, and
// after parkFor it leaves the client. Each sink gets exactly the offsets from
// where it was added, never a record of an earlier one.
func TestMirrorFetcherParksRemovedPartitions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(p int32, n int) {
		t.Helper()
		for i := range n {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := newMirrorFetcher("m", kafkaconn.Config{BootstrapServers: c.ListenAddrs()}, slog.Default(),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	p0, p1 := topicPartition{"t", 0}, topicPartition{"t", 1}
	paused := func() []int32 { return f.cl.PauseFetchPartitions(nil)["t"] }
	waitOffsets := func(what string, s *recordingSink, want []int64) {
		t.Helper()
		waitFor(t, what, func() (bool, string) {
			got := s.got()
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
				t.Fatalf("%s: got offsets %v, want %v", what, got, want)
			}
			return len(got) == len(want), fmt.Sprint(got)
		})
	}

	produce(0, 10)
	produce(1, 10)
	a, b := &recordingSink{}, &recordingSink{}
	f.add(p0, 0, a.sink())
	f.add(p1, 0, b.sink())
	waitOffsets("first reads of t/0", a, offsetRange(0, 10))
	waitOffsets("first reads of t/1", b, offsetRange(0, 10))

	// Removed: parked (paused) while t/1 goes on.
	f.remove(p0)
	if got := paused(); !slices.Equal(got, []int32{0}) {
		t.Fatalf("paused partitions after removing t/0: %v, want [0]", got)
	}
	produce(0, 5)
	produce(1, 5)
	waitOffsets("t/1 while t/0 is parked", b, offsetRange(0, 15))
	if got := a.got(); len(got) != 10 {
		t.Fatalf("the removed sink was handed %v", got[10:])
	}

	// Back where its cursor stands: resumed, from there.
	a2 := &recordingSink{}
	f.add(p0, 10, a2.sink())
	waitOffsets("t/0 resumed at 10", a2, offsetRange(10, 15))
	if got := paused(); len(got) != 0 {
		t.Fatalf("paused partitions after t/0 came back: %v", got)
	}

	// Back somewhere else (a retry from an older checkpoint): from there.
	f.remove(p0)
	a3 := &recordingSink{}
	f.add(p0, 3, a3.sink())
	waitOffsets("t/0 re-added at 3", a3, offsetRange(3, 15))
	if got := paused(); len(got) != 0 {
		t.Fatalf("paused partitions after t/0 was re-added: %v", got)
	}

	// Parked for parkFor: taken out of the client, pause lifted, and a later
	// add starts where it says.
	f.mu.Lock()
	f.parkFor = 50 * time.Millisecond
	f.mu.Unlock()
	f.remove(p1)
	end0 := int64(15)
	waitFor(t, "t/1 swept out of the client", func() (bool, string) {
		// The loop sweeps between polls, and an idle poll does not return:
		// t/0's traffic keeps it turning.
		produce(0, 1)
		end0++
		got := paused()
		return len(got) == 0, fmt.Sprint("paused ", got)
	})
	waitOffsets("t/0 after the sweep", a3, offsetRange(3, end0))
	b2 := &recordingSink{}
	f.add(p1, 12, b2.sink())
	waitOffsets("t/1 added again after the sweep", b2, offsetRange(12, 15))
}

// TestMirrorFetcherGathersAdds: partitions added while an add lingers reach
// the client in one call (kgo loads metadata once per call, at most every
// 10 ms), and each is fetched from where it was added. With no linger the
// fetch loop applies the first add alone.
func TestMirrorFetcherGathersAdds(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, linger := range []time.Duration{time.Second, 0} {
		f, err := newMirrorFetcher("m", kafkaconn.Config{BootstrapServers: c.ListenAddrs()}, slog.Default(),
			kgo.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.addLinger = linger
		f.mu.Unlock()
		var wg sync.WaitGroup
		wg.Go(func() { f.add(topicPartition{"t", 0}, 0, (&recordingSink{}).sink()) })
		waitFor(t, "the first add taken or lingering", func() (bool, string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			// Lingering, the add stays pending; without, the loop takes it.
			return (linger > 0) == (len(f.pending) == 1), fmt.Sprint(len(f.pending), " pending")
		})
		if linger == 0 {
			wg.Wait() // applied alone
		}
		for p := int32(1); p < 3; p++ {
			wg.Go(func() { f.add(topicPartition{"t", p}, 0, (&recordingSink{}).sink()) })
		}
		wg.Wait()
		want := 1
		if linger == 0 {
			want = 2 // the first alone, then the other two (or one each)
		}
		if linger > 0 && f.addCalls != want || linger == 0 && f.addCalls < want {
			t.Errorf("linger %v: %d client calls added partitions, want %d", linger, f.addCalls, want)
		}
		f.close()
	}
}

// TestDeliverInTurns: a poll's partitions are handed about pieceBytes of
// records each in turn, every record once and in order, and a partition's
// error comes with its last piece.
func TestDeliverInTurns(t *testing.T) {
	var order []string
	var got [2][]int64
	var errs [2]error
	var turns []*recordTurn
	for i, n := range []int{3, 1} { // pieces of two records of half pieceBytes
		var recs []*kgo.Record
		for o := range int64(2 * n) {
			recs = append(recs, &kgo.Record{Offset: o, Value: make([]byte, pieceBytes/2)})
		}
		sink := &fetchSink{deliver: func(b fetchBatch) {
			order = append(order, fmt.Sprintf("%d:%d", i, len(b.records)))
			for _, r := range b.records {
				got[i] = append(got[i], r.Offset)
			}
			if b.err != nil {
				if len(got[i]) != 2*n {
					t.Errorf("partition %d's error came after %d of %d records", i, len(got[i]), 2*n)
				}
				errs[i] = b.err
			}
		}}
		turns = append(turns, &recordTurn{sink: sink, rest: recs, err: fmt.Errorf("end of %d", i), lso: 9})
	}
	deliverInTurns(turns)
	if want := []string{"0:2", "1:2", "0:2", "0:2"}; !slices.Equal(order, want) {
		t.Fatalf("delivered %v, want %v", order, want)
	}
	if !slices.Equal(got[0], []int64{0, 1, 2, 3, 4, 5}) || !slices.Equal(got[1], []int64{0, 1}) {
		t.Fatalf("offsets %v, want each partition's once and in order", got)
	}
	if errs[0] == nil || errs[1] == nil || errs[0].Error() != "end of 0" {
		t.Fatalf("errors %v, want each partition's with its last piece", errs)
	}
}
