package recordbatch_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/recordbatch"
)

// The tests copy batches between two kfake clusters over the real wire
// protocol: a raw fetch from the source, the batches rewritten, one raw
// produce a batch to the destination as an idempotent producer, and a
// consumer of the destination that sees each batch's codec.

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// TestCopyKeepsEveryCodec: records written with codec X are stored on the
// destination in batches of codec X, with their keys, values, headers,
// timestamps and offsets; a topic whose batches mix codecs keeps each
// batch's.
func TestCopyKeepsEveryCodec(t *testing.T) {
	t.Parallel()
	src, dst := newCluster(t), newCluster(t)
	order := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	var want []*kgo.Record
	for i, name := range order {
		// Each codec's producer writes batches of up to 50 records (it may
		// send one early, so the source's batches are read back below).
		want = append(want, produce(t, src, "orders", codecs[name], "", i*100, 100, 50)...)
	}
	raw, _ := fetchRaw(t, src, "orders", 0)
	source, err := recordbatch.Split(raw)
	if err != nil {
		t.Fatal(err)
	}
	var wantCodecs []recordbatch.Codec
	for _, b := range source {
		wantCodecs = append(wantCodecs, b.Codec())
	}
	for c := recordbatch.None; c <= recordbatch.Zstd; c++ {
		// kgo sends a batch too small to shrink uncompressed, so some
		// batches may be none; each codec still writes most of its own.
		if !slices.Contains(wantCodecs, c) {
			t.Fatalf("the source's batches have codecs %v, none %s", wantCodecs, c)
		}
	}
	copied := copyPartition(t, src, dst, "orders", 0)
	if copied.batches != len(source) || copied.fallback != 0 {
		t.Fatalf("copied %+v, want the source's %d batches whole", copied, len(source))
	}
	got, gotCodecs := consume(t, dst, "orders", len(want))
	if !slices.Equal(gotCodecs, wantCodecs) {
		t.Fatalf("destination batch codecs %v, want %v", gotCodecs, wantCodecs)
	}
	for i := range want {
		w, g := want[i], got[i]
		if string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) || !g.Timestamp.Equal(w.Timestamp) ||
			g.Offset != w.Offset || !slices.EqualFunc(g.Headers, w.Headers, func(a, b kgo.RecordHeader) bool {
			return a.Key == b.Key && string(a.Value) == string(b.Value)
		}) {
			t.Fatalf("record %d: destination %s@%d %q %v %v, source %s@%d %q %v %v", i,
				g.Key, g.Offset, g.Value, g.Timestamp, g.Headers, w.Key, w.Offset, w.Value, w.Timestamp, w.Headers)
		}
	}
}

// TestCopyDropsAbortedAndMarkers: from a transactional source only the
// committed transactions' batches are copied, as plain batches, with no
// markers: the destination holds the committed records back to back.
func TestCopyDropsAbortedAndMarkers(t *testing.T) {
	t.Parallel()
	src, dst := newCluster(t), newCluster(t)
	var want []*kgo.Record
	for i, commit := range []bool{true, false, true, false, false, true} {
		recs := produce(t, src, "payments", kgo.ZstdCompression(), fmt.Sprintf("txn-%v", commit), i*10, 10, 10)
		_ = recs
		if commit {
			want = append(want, recs...)
		}
		endTxn(t, commit)
	}
	copied := copyPartition(t, src, dst, "payments", 0)
	if copied.batches != 3 || copied.dropped != 9 {
		t.Fatalf("copied %+v, want 3 batches copied and 9 dropped (3 aborted, 6 markers)", copied)
	}
	got, gotCodecs := consume(t, dst, "payments", len(want))
	for i := range want {
		if string(got[i].Value) != string(want[i].Value) || got[i].Offset != int64(i) {
			t.Fatalf("destination record %d: %q at %d, want %q at %d", i, got[i].Value, got[i].Offset, want[i].Value, i)
		}
	}
	for _, c := range gotCodecs {
		if c != recordbatch.Zstd {
			t.Fatalf("destination codecs %v, want zstd", gotCodecs)
		}
	}
	end := endOffset(t, dst, "payments")
	if end != int64(len(want)) {
		t.Fatalf("destination ends at %d, want %d: markers or aborted records were copied", end, len(want))
	}
}

// TestCorruptBatchIsRefused: a batch whose bytes do not match its CRC is
// not split, so it is never rewritten under a fresh one.
func TestCorruptBatchIsRefused(t *testing.T) {
	t.Parallel()
	src := newCluster(t)
	produce(t, src, "orders", kgo.Lz4Compression(), "", 0, 10, 10)
	raw, _ := fetchRaw(t, src, "orders", 0)
	if _, err := recordbatch.Split(raw); err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 0xff
	if _, err := recordbatch.Split(raw); err == nil {
		t.Fatal("a batch with a flipped byte was split")
	}
}

// txnState is the transactional producer the current test writes with.
var txnState struct {
	sync.Mutex
	cl *kgo.Client
}

func newCluster(t *testing.T) *kgo.Client {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "payments"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records with codec in batches of per, numbered from
// first, and returns them as written (offsets set). A txn name writes them
// in one transaction, ended by endTxn.
func produce(t *testing.T, admin *kgo.Client, topic string, codec kgo.CompressionCodec, txn string, first, n, per int) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(admin.OptValue(kgo.SeedBrokers).([]string)...), kgo.ProducerBatchCompression(codec),
		kgo.ManualFlushing(), kgo.DefaultProduceTopic(topic)}
	if txn != "" {
		opts = append(opts, kgo.TransactionalID(txn+"-"+t.Name()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	var out []*kgo.Record
	base := time.UnixMilli(1_700_000_000_000)
	for i := first; i < first+n; i += per {
		var wg sync.WaitGroup
		for j := i; j < i+per; j++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", j), Value: fmt.Appendf(nil, "value %d %s", j, slices.Repeat([]byte("x"), j%7)),
				Timestamp: base.Add(time.Duration(j) * time.Millisecond),
				Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", j)}}}
			out = append(out, r)
			wg.Add(1)
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
		}
		if err := cl.Flush(ctx); err != nil { // one batch of per records
			t.Fatal(err)
		}
		wg.Wait()
	}
	if txn != "" {
		txnState.Lock()
		txnState.cl = cl
		return out // endTxn closes it
	}
	cl.Close()
	return out
}

// endTxn commits or aborts the transaction produce began.
func endTxn(t *testing.T, commit bool) {
	t.Helper()
	cl := txnState.cl
	txnState.cl = nil
	txnState.Unlock()
	if err := cl.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
	cl.Close()
}

// copied counts what copyPartition did with the source's batches.
type copied struct{ batches, dropped, fallback int }

// copyPartition copies a partition's committed batches whole, as one
// idempotent producer, until it has read to the source's end.
func copyPartition(t *testing.T, src, dst *kgo.Client, topic string, partition int32) copied {
	t.Helper()
	ctx := t.Context()
	pid, epoch := initProducer(t, dst)
	dstTopics, err := kadm.NewClient(dst).ListTopics(ctx, topic)
	if err != nil || dstTopics[topic].Err != nil {
		t.Fatalf("list destination %s: %v %v", topic, err, dstTopics[topic].Err)
	}
	var res copied
	var seq int32
	for next := int64(0); ; {
		raw, aborted := fetchRawFrom(t, src, topic, partition, next)
		batches, err := recordbatch.Split(raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(batches) == 0 {
			return res
		}
		keep := recordbatch.NewCommitted(aborted)
		for i := range batches {
			b := &batches[i]
			next = b.NextOffset()
			ok, err := keep.Keep(b)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				res.dropped++
				continue
			}
			if why := b.WholeCopyProblem(0); why != "" {
				res.fallback++
				continue
			}
			produceRaw(t, dst, topic, dstTopics[topic].ID, partition, b.AppendProduced(nil, pid, epoch, seq))
			seq += b.NumRecords
			res.batches++
		}
	}
}

// produceRaw sends one batch to a partition and fails the test unless the
// broker takes it.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, topicID [16]byte, partition int32, batch []byte) {
	t.Helper()
	if err := produceRawErr(t, cl, topic, topicID, partition, batch); err != nil {
		t.Fatalf("produce a batch to %s/%d: %v", topic, partition, err)
	}
}

// produceRawErr sends one batch to a partition and returns the broker's
// error for it.
func produceRawErr(t *testing.T, cl *kgo.Client, topic string, topicID [16]byte, partition int32, batch []byte) error {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// initProducer gets an idempotent producer id from the cluster.
func initProducer(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60_000
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func fetchRaw(t *testing.T, cl *kgo.Client, topic string, partition int32) ([]byte, []recordbatch.Aborted) {
	return fetchRawFrom(t, cl, topic, partition, 0)
}

// fetchRawFrom reads a partition's bytes from offset, read_committed, with
// the aborted transactions the broker lists.
func fetchRawFrom(t *testing.T, cl *kgo.Client, topic string, partition int32, offset int64) ([]byte, []recordbatch.Aborted) {
	t.Helper()
	ctx := t.Context()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("list %s: %v %v", topic, err, topics[topic].Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 0, 1<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topics[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = partition, offset, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := cl.Broker(int(topics[topic].Partitions[partition].Leader)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s/%d@%d: %v", topic, partition, offset, kerr.ErrorForCode(p.ErrorCode))
	}
	var aborted []recordbatch.Aborted
	for _, a := range p.AbortedTransactions {
		aborted = append(aborted, recordbatch.Aborted{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	return p.RecordBatches, aborted
}

// batchCodecs records the codec of every batch a consumer reads.
type batchCodecs struct {
	mu     sync.Mutex
	codecs []recordbatch.Codec
}

func (h *batchCodecs) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.codecs = append(h.codecs, recordbatch.Codec(m.CompressionType))
}

// consume reads n records of the destination's topic from its start, and
// the codecs of the batches they came in.
func consume(t *testing.T, cl *kgo.Client, topic string, n int) ([]*kgo.Record, []recordbatch.Codec) {
	t.Helper()
	hook := &batchCodecs{}
	c, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from the destination", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	return out, slices.Clone(hook.codecs)
}

func endOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}
