package partition_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/batchfetch"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioBatchCopyKeepsCodecs: copying batches whole, every batch keeps
// its codec on the destination (none, gzip, snappy, lz4, zstd, each in its
// own batch), a transactional source gives only its committed batches as
// plain ones, and the records are exact.
func TestScenarioBatchCopyKeepsCodecs(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	addr := env.Clusters.SourceAddr()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	for i, c := range codecs {
		produceBatch(t, addr, c, "", false, i*20)
	}
	// Transactions: committed (zstd), aborted (zstd), committed (lz4).
	produceBatch(t, addr, kgo.ZstdCompression(), t.Name()+"-1", true, 100)
	produceBatch(t, addr, kgo.ZstdCompression(), t.Name()+"-2", false, 120)
	produceBatch(t, addr, kgo.Lz4Compression(), t.Name()+"-3", true, 140)

	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitMirrored(t, env.Env, "orders", 2, 20*time.Second)

	for p := int32(0); p < 2; p++ {
		want := sourceCommittedCodecs(t, addr, "orders", p)
		for _, c := range []recordbatch.Codec{recordbatch.Gzip, recordbatch.Snappy, recordbatch.LZ4, recordbatch.Zstd} {
			if !slices.Contains(want, c) {
				t.Fatalf("orders/%d: the source's committed batches are %v, none %s", p, want, c)
			}
		}
		if got := destinationCodecs(t, env.Clusters.DestinationAddr(), "orders", p, 140); !slices.Equal(got, want) {
			t.Fatalf("orders/%d: destination batches %v, want the source's committed ones %v", p, got, want)
		}
	}
}

// sourceCommittedCodecs returns the codecs of a source partition's batches
// that read_committed keeps, in order, read raw to the partition's end.
func sourceCommittedCodecs(t *testing.T, addr, topic string, p int32) []recordbatch.Codec {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := batchfetch.New(batchfetch.Config{Client: cl, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end := workertest.ReadAll(t, addr, topic, p, false)
	last := end[len(end)-1].Offset
	var mu sync.Mutex
	var codecs []recordbatch.Codec
	next := int64(0)
	f.Add(topic, p, 0, func(got batchfetch.Fetched) {
		mu.Lock()
		defer mu.Unlock()
		keep := recordbatch.NewCommitted(got.Aborted)
		for i := range got.Batches {
			b := &got.Batches[i]
			next = b.NextOffset()
			if ok, err := keep.Keep(b); err == nil && ok {
				codecs = append(codecs, b.Codec())
			}
		}
	})
	workertest.WaitFor(t, 10*time.Second, "the source's batches", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return next > last, fmt.Sprintf("read to %d of %d", next, last+1)
	})
	f.Remove(topic, p)
	return codecs
}

// produceBatch writes one batch of 20 compressible records to each of the
// two partitions, numbered from first, in a transaction when txn is set.
func produceBatch(t *testing.T, addr string, codec kgo.CompressionCodec, txn string, commit bool, first int) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec), kgo.ManualFlushing(), kgo.DefaultProduceTopic("orders")}
	if txn != "" {
		opts = append(opts, kgo.TransactionalID(txn))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	base := time.UnixMilli(1_700_000_000_000)
	var wg sync.WaitGroup
	for p := int32(0); p < 2; p++ {
		for i := first; i < first+20; i++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "k%d", i),
				Value:     fmt.Appendf(nil, "record %d of partition %d %s", i, p, strings.Repeat("abc", 40)),
				Timestamp: base.Add(time.Duration(i) * time.Second), Headers: []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}}},
				func(_ *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
					}
					wg.Done()
				})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if txn != "" {
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
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

// destinationCodecs reads n records of a destination partition and returns
// the codecs of the batches they came in.
func destinationCodecs(t *testing.T, addr, topic string, p int32, n int) []recordbatch.Codec {
	t.Helper()
	hook := &batchCodecs{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.WithHooks(hook),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for read := 0; read < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s/%d: read %d of %d records", topic, p, read, n)
		}
		read += len(fs.Records())
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	return slices.Clone(hook.codecs)
}
