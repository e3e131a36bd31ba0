package recordbatch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/recordbatch"
)

func TestMain(m *testing.M) {
	devcluster.ServeIfChild() // the benchmark's kfake clusters, when re-executed as their process
	os.Exit(m.Run())
}

// BenchmarkCopyLoops measures, before the data plane copies batches, what
// copying them whole can gain: a plain franz-go record loop (consume, then
// produce each record with the source's codec) against two batch loops over
// the same source topic, into a blackholed destination, timed to every
// record copied. Both batch loops fetch raw and split, filter and rewrite
// the batches; the first sends rounds of one batch per partition, one
// request at a time, the second hands them to batchproduce.Producer, which
// keeps a request in flight per partition's leader. The clusters run in
// a child process, so cores are the copier's alone.
//
// KMIRROR_BENCH_RECORDS sets the records of a copy (default 300,000 of
// 1 KiB; 100 B copies take ten times as many).
func BenchmarkCopyLoops(b *testing.B) {
	clusters, err := devcluster.Start(devcluster.Config{BlackholeDestination: true, Process: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(clusters.Close)
	base := 300_000
	if v := os.Getenv("KMIRROR_BENCH_RECORDS"); v != "" {
		if base, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range benchCodecs {
		for _, size := range []int{1024, 100} {
			n := base
			if size == 100 {
				n *= 10
			}
			b.Run(fmt.Sprintf("%s/%dB", c.name, size), func(b *testing.B) {
				topic := fmt.Sprintf("loops-%s-%d-%d", c.name, size, rand.Int())
				fillCompressed(b, clusters, topic, c.codec, n, size)
				mb := float64(n*size) / 1e6
				for range b.N {
					rec := timeCopy(b, func() { recordLoop(b, clusters, topic, c.codec, n) })
					bat := timeCopy(b, func() { batchLoop(b, clusters, topic) })
					prod := timeCopy(b, func() { producerLoop(b, clusters, topic) })
					b.ReportMetric(mb/prod.wall.Seconds(), "producer-MB/s")
					b.ReportMetric(rec.wall.Seconds()/prod.wall.Seconds(), "producer/record")
					b.ReportMetric(prod.cpu.Seconds()/mb*1000, "producer-cpu-ms/MB")
					b.ReportMetric(prod.cpu.Seconds()/rec.cpu.Seconds(), "producer/record-cpu")
					b.ReportMetric(mb/rec.wall.Seconds(), "record-MB/s")
					b.ReportMetric(mb/bat.wall.Seconds(), "batch-MB/s")
					b.ReportMetric(rec.wall.Seconds()/bat.wall.Seconds(), "batch/record")
					b.ReportMetric(rec.cpu.Seconds()/mb*1000, "record-cpu-ms/MB")
					b.ReportMetric(bat.cpu.Seconds()/mb*1000, "batch-cpu-ms/MB")
					b.ReportMetric(bat.cpu.Seconds()/rec.cpu.Seconds(), "batch/record-cpu")
				}
			})
		}
	}
}

const loopPartitions = 12

type copyCost struct{ wall, cpu time.Duration }

func timeCopy(b *testing.B, copy func()) copyCost {
	start, cpu := time.Now(), processCPU(b)
	copy()
	return copyCost{wall: time.Since(start), cpu: processCPU(b) - cpu}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fillCompressed writes n records of size bytes over the topic's
// partitions, compressed with codec in batches of up to 64 KiB.
func fillCompressed(b *testing.B, clusters *devcluster.Clusters, topic string, codec kgo.CompressionCodec, n, size int) {
	b.Helper()
	ctx := context.Background()
	for _, addr := range []string{clusters.SourceAddr(), clusters.DestinationAddr()} {
		adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			b.Fatal(err)
		}
		_, err = kadm.NewClient(adm).CreateTopic(ctx, loopPartitions, 1, nil, topic)
		adm.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerBatchCompression(codec), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	pool := make([]byte, 1<<20+size)
	for i := range pool {
		pool[i] = 'a' + byte(rng.IntN(16))
	}
	for i := range n {
		off := (i * 7919) % (1 << 20)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % loopPartitions),
			Key: strconv.AppendInt(nil, int64(i), 10), Value: pool[off : off+size]}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// recordLoop is the plain franz-go copy: every record consumed and produced
// again, compressed with the source's codec.
func recordLoop(b *testing.B, clusters *devcluster.Clusters, topic string, codec kgo.CompressionCodec, n int) {
	offsets := map[int32]kgo.Offset{}
	for p := range int32(loopPartitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	src, err := kgo.NewClient(kgo.SeedBrokers(clusters.SourceAddr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(clusters.DestinationAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(codec))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	ctx := context.Background()
	for copied := 0; copied < n; {
		fs := src.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			dst.Produce(ctx, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: r.Headers, Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
			copied++
		})
	}
	if err := dst.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// batchLoop copies every partition's batches whole: one fetch of all
// partitions from the source's broker at a time, overlapped with producing
// the last one's batches as rounds of one batch per partition (a broker
// takes one batch of a partition per request), as one idempotent producer.
func batchLoop(b *testing.B, clusters *devcluster.Clusters, topic string) {
	ctx := context.Background()
	src := newRawSource(b, clusters, topic)
	defer src.cl.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(clusters.DestinationAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	dstTopics, err := kadm.NewClient(dst).ListTopics(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionTimeoutMillis = 60_000
	pid, err := init.RequestWith(ctx, dst)
	if err != nil || pid.ErrorCode != 0 {
		b.Fatalf("init producer id: %v %v", err, kerr.ErrorForCode(pid.ErrorCode))
	}
	dstBroker := dst.Broker(int(dstTopics[topic].Partitions[0].Leader))
	next := make([]int64, loopPartitions)
	seq := make([]int32, loopPartitions)
	done := func() bool { return src.done(next) }
	fetch := func() *kmsg.FetchResponse { return src.fetch(next) }
	type fetched struct{ parts [][]recordbatch.Batch }
	// split turns a response into each partition's kept batches and moves
	// the fetch positions past them.
	split := func(resp *kmsg.FetchResponse) fetched {
		out := fetched{parts: make([][]recordbatch.Batch, loopPartitions)}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				b.Fatalf("fetch %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			batches, err := recordbatch.Split(rp.RecordBatches)
			if err != nil {
				b.Fatal(err)
			}
			var aborted []recordbatch.Aborted
			for _, a := range rp.AbortedTransactions {
				aborted = append(aborted, recordbatch.Aborted{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
			}
			keep := recordbatch.NewCommitted(aborted)
			for i := range batches {
				bt := batches[i]
				next[rp.Partition] = bt.NextOffset()
				if ok, err := keep.Keep(&bt); err != nil || !ok {
					continue
				}
				if why := bt.WholeCopyProblem(0); why != "" {
					b.Fatalf("batch at %d: %s", bt.BaseOffset, why)
				}
				out.parts[rp.Partition] = append(out.parts[rp.Partition], bt)
			}
		}
		return out
	}
	produce := func(f fetched) {
		var buf []byte
		for round := 0; ; round++ {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 10_000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, dstTopics[topic].ID
			buf = buf[:0]
			for p, batches := range f.parts {
				if round >= len(batches) {
					continue
				}
				bt := &batches[round]
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(p)
				start := len(buf)
				buf = bt.AppendProduced(buf, pid.ProducerID, pid.ProducerEpoch, seq[p])
				rp.Records = buf[start:len(buf):len(buf)]
				seq[p] += bt.NumRecords
				rt.Partitions = append(rt.Partitions, rp)
			}
			if len(rt.Partitions) == 0 {
				return
			}
			req.Topics = append(req.Topics, rt)
			resp, err := dstBroker.Request(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range resp.(*kmsg.ProduceResponse).Topics[0].Partitions {
				if p.ErrorCode != 0 {
					b.Fatalf("produce %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
	// The next fetch runs while the last one's batches are produced.
	cur := split(fetch())
	for {
		if done() {
			produce(cur)
			return
		}
		resp := make(chan *kmsg.FetchResponse, 1)
		go func() { resp <- fetch() }()
		produce(cur)
		cur = split(<-resp)
	}
}

// producerLoop fetches raw as batchLoop does, and hands every kept batch to
// a batchproduce.Producer, fetching on while the producer sends. At most
// 64 MiB of fetched batches wait for their answers.
func producerLoop(b *testing.B, clusters *devcluster.Clusters, topic string) {
	ctx := context.Background()
	src := newRawSource(b, clusters, topic)
	defer src.cl.Close()
	dst, err := kgo.NewClient(kgo.SeedBrokers(clusters.DestinationAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	p, err := batchproduce.New(batchproduce.Config{Client: dst})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	const window = 64 << 20
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		waiting int // bytes fetched and not answered
		failed  error
	)
	next := make([]int64, loopPartitions)
	for !src.done(next) {
		resp := src.fetch(next)
		for _, rp := range resp.Topics[0].Partitions {
			batches, err := recordbatch.Split(rp.RecordBatches)
			if err != nil {
				b.Fatal(err)
			}
			keep := recordbatch.NewCommitted(nil)
			for i := range batches {
				bt := &batches[i]
				next[rp.Partition] = bt.NextOffset()
				if ok, err := keep.Keep(bt); err != nil || !ok {
					continue
				}
				size := len(bt.Raw)
				mu.Lock()
				for waiting > window && failed == nil {
					cond.Wait()
				}
				waiting += size
				mu.Unlock()
				p.Produce(ctx, topic, rp.Partition, bt, func(res batchproduce.Result) {
					mu.Lock()
					waiting -= size
					if res.Err != nil && failed == nil {
						failed = res.Err
					}
					cond.Broadcast()
					mu.Unlock()
				})
			}
		}
	}
	mu.Lock()
	for waiting > 0 && failed == nil {
		cond.Wait()
	}
	mu.Unlock()
	if failed != nil {
		b.Fatal(failed)
	}
}

// rawSource fetches a topic's partitions raw from its one broker, to the
// ends they had when it was made.
type rawSource struct {
	b      *testing.B
	cl     *kgo.Client
	topic  string
	id     [16]byte
	ends   kadm.ListedOffsets
	broker *kgo.Broker
}

func newRawSource(b *testing.B, clusters *devcluster.Clusters, topic string) *rawSource {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(clusters.SourceAddr()))
	if err != nil {
		b.Fatal(err)
	}
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	return &rawSource{b: b, cl: cl, topic: topic, id: topics[topic].ID, ends: ends,
		broker: cl.Broker(int(topics[topic].Partitions[0].Leader))}
}

// done says whether every partition was read to its end.
func (s *rawSource) done(next []int64) bool {
	for p := range int32(loopPartitions) {
		if end, _ := s.ends.Lookup(s.topic, p); next[p] < end.Offset {
			return false
		}
	}
	return true
}

// fetch reads every partition from next, read_committed.
func (s *rawSource) fetch(next []int64) *kmsg.FetchResponse {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 100, 50<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = s.topic, s.id
	for p := range int32(loopPartitions) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, next[p], 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	resp, err := s.broker.Request(context.Background(), req)
	if err != nil {
		s.b.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse)
}
