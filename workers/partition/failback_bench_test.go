package partition_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// The failback benchmark's topics: 1,000,000 records of 100 B on A over 4
// partitions, then 10,000 more written on B after the failover.
const (
	failbackPartitions = 4
	failbackOld        = 1_000_000
	failbackNew        = 10_000
	failbackValueBytes = 100
)

// BenchmarkFailback is the cost of a failback: how long B→A takes,
// and how many records it copies, with continue (A keeps its history and
// receives only B's new records) against recreate (A's topic is dropped and
// B's whole history copied).
//
// Setup, not timed: two identical topics on A, failback-continue and
// failback-recreate, each 1,000,000 records; deployment ab (its own
// database, the server's timings and __mirror_state relay) mirrors both to
// B to lag 0, fails them over (topics removed, STOPPED published to B's
// __mirror_state) and is shut down; 10,000 records are written to each on
// B. Deployment ba (another database, the server's timings, its state
// relay into A) then runs with source B and destination A. Timed, one
// after the other on the same instance: topics:add of failback-continue
// with continue, and of failback-recreate with recreate, each until every
// partition is MIRRORING with its checkpoint at B's end (describe shows lag
// 0). At the end A's topics must hold B's records exactly, in order.
//
// Reported for each case: *-s to lag 0 (it includes the wait for the next
// checkpoint save, up to the server's 1 s), *-copied-s to A's end offsets
// reaching B's, *-mirroring-s to the last partition MIRRORING, *-records
// the copies kmirror counted (kmirror_mirrored_records_total), *-cpu-s
// kmirror's CPU; recreate/continue is the ratio of the times to lag 0.
//
// Two topics rather than one topic run twice: each case then starts from
// the state an operator choosing it would find after the failover (A
// holding the old million, B's __mirror_state the STOPPED records, the topic
// new to ba). Recreate run on A after continue would start from an A that
// already holds B's new records and from a restart of ba's topic, with a
// checkpoint and offset map to forget; a fresh A would cost the whole setup
// again. Both topics exist on both clusters through both timed parts, so
// kfake holds the same data in each. Even rounds time continue first, odd
// rounds recreate first (-benchtime 2x runs both orders).
//
//	go test ./workers/partition/ -run '^$' -bench BenchmarkFailback -benchtime 1x -timeout 30m
//
// The clusters run in a child process (KMIRROR_BENCH_CLUSTERS=inprocess
// puts them in this one), so *-cpu-s is kmirror's CPU alone.
func BenchmarkFailback(b *testing.B) {
	var sum [2]failbackResult
	for i := range b.N {
		got := failbackRound(b, i%2 == 1)
		for k := range sum {
			sum[k].add(got[k])
		}
	}
	n := float64(b.N)
	cont, rec := sum[0], sum[1]
	b.ReportMetric(cont.lag0.Seconds()/n, "continue-s")
	b.ReportMetric(cont.mirroring.Seconds()/n, "continue-mirroring-s")
	b.ReportMetric(cont.copied.Seconds()/n, "continue-copied-s")
	b.ReportMetric(float64(cont.records)/n, "continue-records")
	b.ReportMetric(cont.cpu.Seconds()/n, "continue-cpu-s")
	b.ReportMetric(rec.lag0.Seconds()/n, "recreate-s")
	b.ReportMetric(rec.mirroring.Seconds()/n, "recreate-mirroring-s")
	b.ReportMetric(rec.copied.Seconds()/n, "recreate-copied-s")
	b.ReportMetric(float64(rec.records)/n, "recreate-records")
	b.ReportMetric(rec.cpu.Seconds()/n, "recreate-cpu-s")
	b.ReportMetric(rec.lag0.Seconds()/cont.lag0.Seconds(), "recreate/continue")
}

// failbackResult is one timed failback of one topic.
type failbackResult struct {
	// lag0 is topics:add to the last partition's checkpoint at B's end,
	// mirroring to the last partition MIRRORING, and copied to A's end
	// offsets reaching B's.
	lag0, mirroring, copied time.Duration
	// records are those ba's instance copied and verified
	// (kmirror_mirrored_records_total).
	records int64
	// cpu is this process's CPU over the timed part.
	cpu time.Duration
}

func (r *failbackResult) add(o failbackResult) {
	r.lag0 += o.lag0
	r.mirroring += o.mirroring
	r.copied += o.copied
	r.records += o.records
	r.cpu += o.cpu
}

// failbackRound builds the setup on clusters and databases of its own and
// times both failbacks: [0] continue, [1] recreate.
func failbackRound(b *testing.B, recreateFirst bool) [2]failbackResult {
	b.StopTimer()
	defer b.StartTimer()
	tb := &scopedTB{TB: b}
	defer tb.close()
	clusters, err := devcluster.Start(devcluster.Config{Process: os.Getenv("KMIRROR_BENCH_CLUSTERS") != "inprocess"})
	if err != nil {
		b.Fatal(err)
	}
	tb.Cleanup(clusters.Close)
	ctx := context.Background()
	a, bAddr := clusters.SourceAddr(), clusters.DestinationAddr()
	topics := [2]string{"failback-continue", "failback-recreate"}

	// A→B to lag 0, then the failover.
	ab := workertest.NewEnvOn(tb, clusters)
	ab.CreateSourceTopics(failbackPartitions, topics[:]...)
	for _, t := range topics {
		produceFailback(b, a, t, failbackOld, "a")
	}
	abIn := ab.StartInstanceOpts("a-to-b", workertest.InstanceOpts{ProductionTimings: true, Sync: true,
		SyncInterval: 30 * time.Second})
	abRelay := startRelay(ab, abIn)
	ab.CreateMirror("ab", `failback-.*`)
	old := map[int32]int64{}
	for p := range int32(failbackPartitions) {
		old[p] = failbackOld / failbackPartitions
	}
	waitLag0(b, ab, "ab", map[string]map[int32]int64{topics[0]: old, topics[1]: old}, 10*time.Minute)
	if _, err := ab.Svc.RemoveTopics(ctx, "ab", `failback-.*`); err != nil {
		b.Fatal(err)
	}
	ab.WaitStates("ab", service.StateStopped, time.Minute)
	waitStoppedPublished(b, bAddr, "ab", topics[:], failbackPartitions)
	// ab has nothing left to do; stopped, it takes no CPU from the timed
	// parts (its syncer would pass every 30 s).
	abRelay.Stop()
	abIn.Stop()

	// B takes writes.
	aBefore, bEnds := map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for _, t := range topics {
		produceFailback(b, bAddr, t, failbackNew, "b")
		aBefore[t] = workertest.EndOffsets(b, workertest.Plain(a), t)
		bEnds[t] = workertest.EndOffsets(b, workertest.Plain(bAddr), t)
		for p := range int32(failbackPartitions) {
			if aBefore[t][p] != old[p] || bEnds[t][p] != old[p]+failbackNew/failbackPartitions {
				b.Fatalf("%s/%d: A ends at %d, B at %d; want %d and %d", t, p, aBefore[t][p], bEnds[t][p],
					old[p], old[p]+failbackNew/failbackPartitions)
			}
		}
	}

	// Deployment ba, B→A, running before the operator adds anything.
	ba := &engineEnv{workertest.NewEnvOn(tb, clusters)}
	if _, err := ba.Svc.CreateMirror(ctx, service.MirrorInput{Name: "ba",
		Source: service.SourceInput{BootstrapServers: bAddr}}, service.WriteOpts{}); err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	baIn := ba.StartInstanceOpts("b-to-a", workertest.InstanceOpts{ProductionTimings: true, Sync: true,
		SyncInterval: 30 * time.Second, Dest: workertest.Plain(a), SourceState: statetopic.ReadState, Registerer: reg})
	baRelay, err := statetopic.NewRelay(statetopic.RelayConfig{Pool: baIn.DataPool, Destination: workertest.Plain(a),
		Notifier: baIn.Notifier, Logger: workertest.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := baRelay.Start(ctx); err != nil {
		b.Fatal(err)
	}
	tb.Cleanup(baRelay.Stop)
	workertest.WaitFor(b, 10*time.Second, "ba's lease session and data pool", func() (bool, string) {
		var n int
		err := ba.Pool.QueryRow(ctx, `SELECT count(*) FROM instances WHERE session_epoch > 0`).Scan(&n)
		st := baIn.DataPool.Stat()
		open := st.TotalConns() - st.ConstructingConns()
		return err == nil && n == 1 && open == st.MaxConns(), fmt.Sprint(n, " sessions, ", open, " connections open, ", err)
	})
	// kgo caches a missing topic for MetadataMinAge: recreate's topic is
	// gone for a moment.
	dst, err := kgo.NewClient(kgo.SeedBrokers(a), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	adm := kadm.NewClient(dst)

	var res [2]failbackResult
	order := []int{0, 1}
	if recreateFirst {
		order = []int{1, 0}
	}
	for _, k := range order {
		res[k] = timeFailback(b, ba, reg, adm, topics[k], k == 1, bEnds[topics[k]])
	}

	// What each case copied, by A's ends, and A's records against B's.
	for k, t := range topics {
		aAfter := workertest.EndOffsets(b, workertest.Plain(a), t)
		var written, want int64
		for p := range int32(failbackPartitions) {
			written += aAfter[p]
			if k == 0 {
				written -= aBefore[t][p]
			}
		}
		if want = failbackNew; k == 1 {
			want = failbackOld + failbackNew
		}
		if written != want || res[k].records != want {
			b.Errorf("%s: A's ends grew by %d and kmirror counted %d copies; want %d", t, written, res[k].records, want)
		}
		ga, gb := partitionDigests(b, a, t, aAfter), partitionDigests(b, bAddr, t, bEnds[t])
		for p := range int32(failbackPartitions) {
			if ga[p] != gb[p] {
				b.Errorf("%s/%d: A holds %d records (digest %.6x), B %d (%.6x)", t, p, ga[p].n, ga[p].sum, gb[p].n, gb[p].sum)
			}
		}
	}
	first := "continue"
	if recreateFirst {
		first = "recreate"
	}
	b.Logf("continue: lag 0 after %s (all MIRRORING %s, copied %s), %d records, %.2f s CPU; recreate: lag 0 after %s (all MIRRORING %s, copied %s), %d records, %.2f s CPU; %s first",
		res[0].lag0.Round(time.Millisecond), res[0].mirroring.Round(time.Millisecond), res[0].copied.Round(time.Millisecond), res[0].records, res[0].cpu.Seconds(),
		res[1].lag0.Round(time.Millisecond), res[1].mirroring.Round(time.Millisecond), res[1].copied.Round(time.Millisecond), res[1].records, res[1].cpu.Seconds(), first)
	return res
}

// timeFailback adds topic to ba with continue or recreate and times it to
// lag 0. Only A's end offsets are polled until they reach B's (kfake answers
// them; polling Postgres every few ms as well would take CPU from the copy
// on two cores); the rows are read after, and say when each partition
// entered MIRRORING and when its checkpoint last moved.
func timeFailback(b *testing.B, ba *engineEnv, reg *prometheus.Registry, adm *kadm.Client, topic string, recreate bool, want map[int32]int64) failbackResult {
	ctx := context.Background()
	in := service.AddTopicsInput{Topic: topic, Continue: !recreate, Recreate: recreate}
	// The console previews an add before it enables it, which is when the
	// API first reads the mirror and the source: not timed, as in
	// BenchmarkThroughput. A plain dry run: the preview of a continue runs
	// the proof itself, on a server configured with its destination.
	if _, err := ba.Svc.AddTopics(ctx, "ba", service.AddTopicsInput{Topic: topic, DryRun: true}); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	counted := mirroredRecords(b, reg, "ba", topic)
	cpu := processCPU()
	b.StartTimer()
	start := time.Now()
	if _, err := ba.Svc.AddTopics(ctx, "ba", in); err != nil {
		b.Fatal(err)
	}
	var r failbackResult
	deadline := start.Add(10 * time.Minute)
	for !endsReached(ctx, adm, topic, want) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: A's ends did not reach B's in 10m", topic)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.copied = time.Since(start)
	ps := waitLag0(b, ba.Env, "ba", map[string]map[int32]int64{topic: want}, time.Minute)
	b.StopTimer()
	r.cpu = processCPU() - cpu
	for _, p := range ps {
		r.mirroring = max(r.mirroring, p.StateChangedAt.Sub(start))
		r.lag0 = max(r.lag0, p.StateChangedAt.Sub(start))
		if p.ProgressedAt != nil {
			r.lag0 = max(r.lag0, p.ProgressedAt.Sub(start))
		}
	}
	r.records = mirroredRecords(b, reg, "ba", topic) - counted
	return r
}

// waitLag0 waits until every partition of the topics in ends is MIRRORING
// with its checkpoint at the given source end, and returns their rows.
func waitLag0(b *testing.B, env *workertest.Env, mirror string, ends map[string]map[int32]int64, timeout time.Duration) []repo.Partition {
	var topics []string
	total := 0
	for t, ps := range ends {
		topics = append(topics, t)
		total += len(ps)
	}
	var ps []repo.Partition
	workertest.WaitFor(b, timeout, fmt.Sprintf("%s %v at lag 0", mirror, topics), func() (bool, string) {
		var err error
		if ps, err = repo.PartitionsList(context.Background(), env.Pool, repo.PartitionsListParams{Mirror: mirror, Topics: topics}); err != nil {
			return false, err.Error()
		}
		done := 0
		for _, p := range ps {
			if p.State == service.StateMirroring && p.SrcNext != nil && *p.SrcNext == ends[p.Topic][p.Partition] && p.StateChangedAt != nil {
				done++
			}
		}
		return done == total, fmt.Sprintf("%d of %d at lag 0", done, total)
	})
	return ps
}

// endsReached reports whether each partition of topic ends at want on the
// cluster adm talks to (false while the topic is missing).
func endsReached(ctx context.Context, adm *kadm.Client, topic string, want map[int32]int64) bool {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	reached := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset >= want[o.Partition] {
			reached++
		}
	})
	return reached == len(want)
}

// mirroredRecords reads kmirror_mirrored_records_total of one topic.
func mirroredRecords(b *testing.B, reg *prometheus.Registry, mirror, topic string) int64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kmirror_mirrored_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["mirror"] == mirror && labels["topic"] == topic {
				return int64(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// produceFailback writes n records of failbackValueBytes, keyed
// prefix-0, prefix-1…, round-robin over the topic's partitions.
func produceFailback(b *testing.B, addr, topic string, n int, prefix string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(uint64(len(prefix)), uint64(n)))
	pool := make([]byte, 1<<20+failbackValueBytes)
	for i := range pool {
		pool[i] = byte('a' + rng.IntN(26))
	}
	ctx := context.Background()
	for i := range n {
		off := (i * 7919) % (1 << 20)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % failbackPartitions),
			Key: strconv.AppendInt([]byte(prefix+"-"), int64(i), 10), Value: pool[off : off+failbackValueBytes]},
			func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// partitionDigest is a partition's record count and a hash of its keys and
// values in offset order.
type partitionDigest struct {
	n   int64
	sum [sha256.Size]byte
}

// partitionDigests reads every partition of topic at addr up to ends.
func partitionDigests(b *testing.B, addr, topic string, ends map[int32]int64) map[int32]partitionDigest {
	offsets := map[int32]kgo.Offset{}
	for p := range ends {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hs, counts, next := map[int32]hash.Hash{}, map[int32]int64{}, map[int32]int64{}
	for p := range ends {
		hs[p] = sha256.New()
	}
	var lb [binary.MaxVarintLen64]byte
	for done := 0; done < len(ends); {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("reading %s at %s: %v", topic, addr, err)
		}
		fs.EachError(func(_ string, p int32, err error) { b.Fatalf("reading %s/%d at %s: %v", topic, p, addr, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if next[r.Partition] >= ends[r.Partition] {
				return
			}
			h := hs[r.Partition]
			h.Write(lb[:binary.PutUvarint(lb[:], uint64(len(r.Key)))])
			h.Write(r.Key)
			h.Write(lb[:binary.PutUvarint(lb[:], uint64(len(r.Value)))])
			h.Write(r.Value)
			counts[r.Partition]++
			if next[r.Partition] = r.Offset + 1; next[r.Partition] >= ends[r.Partition] {
				done++
			}
		})
	}
	out := map[int32]partitionDigest{}
	for p, h := range hs {
		d := partitionDigest{n: counts[p]}
		copy(d.sum[:], h.Sum(nil))
		out[p] = d
	}
	return out
}
