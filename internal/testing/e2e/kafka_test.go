package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
)

// producer writes keyed records to every partition of a source topic
// continuously until stopped: each tick, perTick records per partition,
// numbered per partition in the value, the key and a header.
type producer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	sent int64
	err  error
}

func startProducer(t testing.TB, addr, topic string, partitions int32, tick time.Duration, perTick int) *producer {
	return startProducerOpts(t, addr, topic, partitions, tick, perTick, false)
}

// startProducerOpts is startProducer; with transactional, each tick's
// records are one transaction and every fourth one is aborted (its records
// do not count as sent).
func startProducerOpts(t testing.TB, addr, topic string, partitions int32, tick time.Duration, perTick int, transactional bool) *producer {
	t.Helper()
	return startProducerOn(t, kafkaconn.Config{BootstrapServers: []string{addr}}, topic, partitions, tick, perTick, transactional)
}

// startProducerOn is startProducerOpts on the cluster cl.
func startProducerOn(t testing.TB, conn kafkaconn.Config, topic string, partitions int32, tick time.Duration, perTick int, transactional bool) *producer {
	t.Helper()
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}
	if transactional {
		opts = append(opts, kgo.TransactionalID("e2e-"+topic))
	}
	cl, err := conn.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{cl: cl, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { p.stop() })
	base := time.Now().Add(-time.Hour).UnixMilli()
	go func() {
		defer close(p.done)
		seq := make([]int64, partitions)
		txns := 0
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			var rs []*kgo.Record
			for part := range partitions {
				for range perTick {
					rs = append(rs, testRecord(topic, part, seq[part], base))
					seq[part]++
				}
			}
			// Not ctx: a record must not be cut off half-sent at stop.
			bg := context.Background()
			commit := true
			if transactional {
				if err := cl.BeginTransaction(); err != nil {
					p.fail(err)
					return
				}
				txns++
				commit = txns%4 != 0
			}
			err := cl.ProduceSync(bg, rs...).FirstErr()
			if transactional && err == nil {
				err = cl.EndTransaction(bg, kgo.TransactionEndTry(commit))
			}
			p.mu.Lock()
			if err != nil {
				p.err = err
			} else if commit {
				p.sent += int64(len(rs))
			}
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p
}

// testRecord is record seq of a partition: a unique key, the sequence
// number in the value, repeated headers (one with a nil value) and an
// explicit timestamp that is not the produce time. Every 13th value is nil.
func testRecord(topic string, part int32, seq, baseMillis int64) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: part,
		Key:       []byte(fmt.Sprintf("key-%d-%07d", part, seq)),
		Value:     []byte(fmt.Sprintf(`{"partition":%d,"seq":%d,"payload":"%s"}`, part, seq, strings.Repeat("x", int(seq%64)))),
		Timestamp: time.UnixMilli(baseMillis + seq*7 + int64(part)),
		Headers: []kgo.RecordHeader{
			{Key: "seq", Value: []byte(strconv.FormatInt(seq, 10))},
			{Key: "dup", Value: []byte("a")},
			{Key: "dup", Value: []byte("b")},
			{Key: "empty", Value: nil},
		}}
	if seq%13 == 12 {
		r.Value = nil
	}
	return r
}

func (p *producer) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// count is how many records have been acknowledged so far.
func (p *producer) count() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// stop ends production and returns how many records were acknowledged.
func (p *producer) stop() (int64, error) {
	p.cancel()
	<-p.done
	p.cl.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent, p.err
}

// endOffsets lists a topic's end offsets per partition; committed lists
// the last stable offsets.
func endOffsets(t testing.TB, addr, topic string, committed bool) map[int32]int64 {
	t.Helper()
	out, err := listEnds(addr, topic, committed)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listEnds is endOffsets returning its error: a topic not created yet.
func listEnds(addr, topic string, committed bool) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var l kadm.ListedOffsets
	if committed {
		l, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		l, err = adm.ListEndOffsets(ctx, topic)
	}
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s at %s: %w", topic, addr, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// readPartition reads a whole topic partition, from its log start to its
// end (the last stable offset when readCommitted).
func readPartition(t testing.TB, addr, topic string, part int32, readCommitted bool) []*kgo.Record {
	t.Helper()
	end := endOffsets(t, addr, topic, readCommitted)[part]
	if end == 0 {
		return nil
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	next := int64(0)
	for next < end {
		// Everything below end exists, so a fetch answers at once; a quiet
		// poll means only aborted or control records remain below end.
		pollCtx, pollCancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pollCtx)
		pollCancel()
		if ctx.Err() != nil {
			t.Fatalf("reading %s/%d at %s: timed out at offset %d of %d", topic, part, addr, next, end)
		}
		got := 0
		var ferr error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil && !errors.Is(p.Err, context.DeadlineExceeded) && !errors.Is(p.Err, context.Canceled) {
				ferr = p.Err
			}
			for _, r := range p.Records {
				if r.Offset < end {
					out = append(out, r)
					next = r.Offset + 1
					got++
				}
			}
		})
		if ferr != nil {
			t.Fatalf("reading %s/%d at %s: %v", topic, part, addr, ferr)
		}
		if got == 0 {
			if !readCommitted {
				t.Fatalf("reading %s/%d at %s: nothing after offset %d, end %d", topic, part, addr, next, end)
			}
			break
		}
	}
	return out
}

// recordDiff says how two records differ in what mirroring preserves, or
// "" when they are the same.
func recordDiff(a, b *kgo.Record) string {
	switch {
	case !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil):
		return fmt.Sprintf("keys differ (%q vs %q)", a.Key, b.Key)
	case !bytes.Equal(a.Value, b.Value) || (a.Value == nil) != (b.Value == nil):
		return fmt.Sprintf("values differ (%q vs %q)", a.Value, b.Value)
	case !a.Timestamp.Equal(b.Timestamp):
		return fmt.Sprintf("timestamps differ (%s vs %s)", a.Timestamp.UTC().Format(time.RFC3339Nano), b.Timestamp.UTC().Format(time.RFC3339Nano))
	case len(a.Headers) != len(b.Headers):
		return fmt.Sprintf("header counts differ (%d vs %d)", len(a.Headers), len(b.Headers))
	}
	for i := range a.Headers {
		ha, hb := a.Headers[i], b.Headers[i]
		if ha.Key != hb.Key || !bytes.Equal(ha.Value, hb.Value) || (ha.Value == nil) != (hb.Value == nil) {
			return fmt.Sprintf("header %d differs (%s=%q vs %s=%q)", i, ha.Key, ha.Value, hb.Key, hb.Value)
		}
	}
	return ""
}

// seqOf is the producer's sequence number of a record, from its header.
func seqOf(r *kgo.Record) int64 {
	for _, h := range r.Headers {
		if h.Key == "seq" {
			n, err := strconv.ParseInt(string(h.Value), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// describeMismatch explains how a destination partition differs from the
// source: duplicated and missing sequence numbers, and the first record
// that differs.
func describeMismatch(src, dst []*kgo.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "source %d record(s), destination %d", len(src), len(dst))
	seen := map[int64][]int64{}
	for _, r := range dst {
		s := seqOf(r)
		seen[s] = append(seen[s], r.Offset)
	}
	var dups, missing []string
	for s, offs := range seen {
		if len(offs) > 1 {
			dups = append(dups, fmt.Sprintf("seq %d at destination offsets %v", s, offs))
		}
	}
	for _, r := range src {
		if _, ok := seen[seqOf(r)]; !ok {
			missing = append(missing, fmt.Sprintf("seq %d (source offset %d)", seqOf(r), r.Offset))
		}
	}
	limit := func(xs []string) string {
		if len(xs) > 10 {
			return strings.Join(xs[:10], "; ") + fmt.Sprintf("; … %d more", len(xs)-10)
		}
		return strings.Join(xs, "; ")
	}
	if len(dups) > 0 {
		fmt.Fprintf(&b, "\n  duplicated on the destination (%d): %s", len(dups), limit(dups))
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\n  missing on the destination (%d): %s", len(missing), limit(missing))
	}
	for i := range min(len(src), len(dst)) {
		if d := recordDiff(src[i], dst[i]); d != "" {
			fmt.Fprintf(&b, "\n  first difference at index %d (source offset %d seq %d, destination offset %d seq %d): %s",
				i, src[i].Offset, seqOf(src[i]), dst[i].Offset, seqOf(dst[i]), d)
			break
		}
	}
	return b.String()
}

// transactions returns a function that writes one transaction of n records
// a partition to topic, numbered from *seq, and commits or aborts it.
func transactions(t testing.TB, cl kafkaconn.Config, topic string, parts int32, n int64, seq *int64) func(commit bool) {
	txn := client(t, cl, kgo.TransactionalID(topic+"-txn-"+strconv.FormatInt(time.Now().UnixNano(), 36)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return func(commit bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		base := time.Now().Add(-time.Hour).UnixMilli()
		var rs []*kgo.Record
		for p := range parts {
			for i := range n {
				rs = append(rs, testRecord(topic, p, *seq+i, base))
			}
		}
		*seq += n
		if err := txn.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
}
