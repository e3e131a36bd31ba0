package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/workers/workertest"
)

// TestDisasterRecoveryRunbook runs docs/disaster-recovery.md: every sh block
// of it, in its order, with the kmirror binary built from this tree, against
// two deployments (kmirror-A writing to cluster A with a mirror from B,
// kmirror-B writing to B with a mirror from A, each with its own database)
// in this process. Between the blocks it plays the applications (producers
// on the primary; a consumer group) and checks, per partition and in order,
// that each cluster holds exactly the records it should, none twice.
//
// The planned switchover and failback run twice; then the unplanned
// failover, where A took records B never read (B's loss of A is a pause of
// its mirror here), and the failback once more. orders is written in
// transactions, some aborted, so offsets differ between the clusters;
// accounts is compacted on A before it is first mirrored, so A's offsets
// have gaps.
func TestDisasterRecoveryRunbook(t *testing.T) {
	t.Parallel()
	start := time.Now()
	rb := loadRunbook(t, filepath.Join("..", "..", "docs", "disaster-recovery.md"))
	bin := t.TempDir()
	built := make(chan error, 1)
	go func() { built <- buildKmirror(bin) }()

	// One devcluster is the two clusters: its "source" is A, its
	// "destination" B.
	clusters, err := devcluster.Start(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clusters.Close) // after the deployments stop: cleanups are LIFO
	w := &drWorld{t: t, a: clusters.SourceAddr(), b: clusters.DestinationAddr(),
		log: map[string][][]string{}, consumed: map[string][]int{}}
	for _, topic := range drTopics {
		cfg := map[string]string(nil)
		if topic == "accounts" {
			cfg = map[string]string{"cleanup.policy": "compact"}
		}
		if err := clusters.Source.CreateTopic(topic, drPartitions, cfg); err != nil {
			t.Fatal(err)
		}
		w.log[topic] = make([][]string, drPartitions)
		w.consumed[topic] = make([]int, drPartitions)
	}
	w.produce(w.a, "a0", 12)
	clusters.Source.Compact()
	w.logFromCompacted()
	w.consume(w.a, "A", 2)

	// The deployments check tokens, as every one beyond loopback does: the
	// runbook's commands, curl included, must send KMIRROR_TOKEN.
	tokens := newDRTokens(t)
	w.startRegistries()
	kmA := startDeployment(t, "kmirror-a", w.a, w.reg.a.URL(), tokens.server)
	kmB := startDeployment(t, "kmirror-b", w.b, w.reg.b.URL(), tokens.server)
	w.apiA = apiClient{tb: t, base: kmA, http: &http.Client{Timeout: 30 * time.Second}, token: tokens.operator}
	w.apiB = apiClient{tb: t, base: kmB, http: &http.Client{Timeout: 30 * time.Second}, token: tokens.operator}
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	rb.env = runbookEnv(bin, "KMIRROR_A="+kmA, "KMIRROR_B="+kmB, "CLUSTER_A="+w.a, "CLUSTER_B="+w.b,
		"REGISTRY_A="+w.reg.a.URL(), "REGISTRY_B="+w.reg.b.URL(), "KMIRROR_TOKEN="+tokens.operator)
	rb.diagnose = w.failedPartitions
	t.Logf("set up in %s", time.Since(start).Round(time.Millisecond))

	// kmirror-B mirrors A into B: B holds A's committed records, none of the
	// aborted ones, and accounts is compacted there too. Creating the
	// mirrors takes an admin token, as the runbook says.
	rb.run("prepare", "KMIRROR_TOKEN="+tokens.admin)
	w.waitHolds(w.b, "B, mirroring A", nil)
	w.wantRaw(w.b, "B, mirroring A", drSnapshot{}, drTopics)
	w.wantCompacted(w.b, "accounts")
	out, _ := rb.run("prepare-schemas")
	wantOutput(t, "prepare-schemas", out, "  orders-value: 1 version(s), READONLY")
	w.waitSchemas("B, mirroring A", w.reg.regB, sr.ModeReadOnly)

	for round := 1; round <= 2; round++ {
		if round > 1 {
			rb.again("switchover-wait")
		}
		w.switchover(rb, round)
		w.failback(rb, fmt.Sprintf("round %d", round), true)
	}
	w.unplanned(rb)
	rb.again("failback-wait")
	w.failback(rb, "after the unplanned failover", false)
	rb.finish()
	t.Logf("the runbook ran in %s", time.Since(start).Round(time.Millisecond))
}

// switchover is part 1.1: A is the primary and kmirror-B mirrors it into B;
// after it B is the primary and kmirror-A mirrors B into A.
func (w *drWorld) switchover(rb *runbook, round int) {
	t := w.t
	w.produce(w.a, fmt.Sprintf("r%d-a", round), 4)
	w.waitHolds(w.b, "B, mirroring A", nil)
	w.consume(w.a, "A", 1)

	// The producers stop; the step's loop ends once the failover preview
	// leaves nothing behind.
	rb.run("switchover-wait")
	w.holds(w.b, "B at lag 0", nil)
	// The consumers stop; their group's offsets go to B.
	out, _ := rb.run("switchover-sync-groups")
	wantOutput(t, "switchover-sync-groups", out, "group offsets: ok")
	out, _ = rb.run("switchover-preview")
	wantOutput(t, "switchover-preview", out, "Removing would leave no record behind")
	aOld, bAt := w.snapshot(w.a), w.snapshot(w.b)
	out, _ = rb.run("switchover-remove")
	wantOutput(t, "switchover-remove", out, `"last_mirrored_source_offset"`)
	w.wantStoppedAt(w.apiB, "from-a", aOld, bAt, nil)
	// B's subjects open; its producers register a version of their own.
	rb.run("switchover-schemas")
	w.waitSchemas("B, the primary", w.reg.regB, sr.ModeReadWrite)
	w.registerOrders(w.reg.regB, fmt.Sprintf("r%d-b", round))

	// The producers write to B.
	w.produce(w.b, fmt.Sprintf("r%d-b1", round), 4)
	w.holds(w.b, "B, the primary", nil)
	rb.run("switchover-published")
	out, _ = rb.run("switchover-continue-preview")
	wantOutput(t, "switchover-continue-preview", out, "continue  offset_map")
	wantOutput(t, "switchover-continue-preview", out, "nothing was changed (dry run)")
	out, _ = rb.run("switchover-continue")
	wantOutput(t, "switchover-continue", out, "All partitions are MIRRORING")
	w.wantDescribeCurrent(w.apiA, "from-b", w.b, fmt.Sprintf("switchover round %d", round))
	w.waitHolds(w.a, "A, mirroring B", nil)
	w.wantRaw(w.a, "A, mirroring B", aOld, drTopics)
	w.waitSchemas("A, mirroring B", w.reg.regA, sr.ModeReadOnly)
	// The consumers move to B and resume at the record after their last
	// one on A.
	w.consume(w.b, "B", 2)
	w.produce(w.b, fmt.Sprintf("r%d-b2", round), 4)
	w.waitHolds(w.a, "A, mirroring B", nil)
	w.wantRaw(w.a, "A, mirroring B", aOld, drTopics)
	w.consume(w.b, "B", 1)
}

// failback is part 1.2: B is the primary and kmirror-A mirrors it into A;
// after it A is the primary and kmirror-B mirrors A into B. With consumers,
// the consumer group moves from B to A.
func (w *drWorld) failback(rb *runbook, what string, consumers bool) {
	t := w.t
	// The producers stop; the step ends at lag 0.
	rb.run("failback-wait")
	w.holds(w.a, "A at lag 0 ("+what+")", nil)
	// The consumers stop; their group's offsets go to A.
	out, _ := rb.run("failback-sync-groups")
	wantOutput(t, "failback-sync-groups", out, "group offsets: ok")
	out, _ = rb.run("failback-preview")
	wantOutput(t, "failback-preview", out, "Removing would leave no record behind")
	bOld, aAt := w.snapshot(w.b), w.snapshot(w.a)
	rb.run("failback-remove")
	w.wantStoppedAt(w.apiA, "from-b", bOld, aAt, nil)
	// A's subjects open, holding B's versions with B's ids; A's producers
	// register a version of their own.
	out, _ = rb.run("failback-schemas")
	wantOutput(t, "failback-schemas", out, "READWRITE")
	w.waitSchemas("A, the primary again ("+what+")", w.reg.regA, sr.ModeReadWrite)
	w.registerOrders(w.reg.regA, "back-on-a-"+strings.ReplaceAll(what, " ", "-"))

	// The producers and consumers are back on A: the group resumes at the
	// record after its last one on B.
	w.produce(w.a, "back-on-a-"+strings.ReplaceAll(what, " ", "-"), 4)
	if consumers {
		w.consume(w.a, "A", 2)
	}
	rb.run("failback-published")
	out, _ = rb.run("failback-continue-preview")
	wantOutput(t, "failback-continue-preview", out, "continue  offset_map")
	wantOutput(t, "failback-continue-preview", out, "nothing was changed (dry run)")
	out, _ = rb.run("failback-continue")
	wantOutput(t, "failback-continue", out, "All partitions are MIRRORING")
	w.wantDescribeCurrent(w.apiB, "from-a", w.a, "failback "+what)
	w.waitHolds(w.b, "B, mirroring A again ("+what+")", nil)
	w.wantRaw(w.b, "B, mirroring A again ("+what+")", bOld, drTopics)
	w.waitSchemas("B, mirroring A again ("+what+")", w.reg.regB, sr.ModeReadOnly)
}

// unplanned is part 2: kmirror-B loses A while A takes a committed
// transaction on orders/1 (B's loss of A is a pause of its mirror here: a
// kmirror that cannot reach A reads nothing of it either); B takes over
// without it, and when A is back its tail fails the continue, and A's topic
// is replaced with recreate.
func (w *drWorld) unplanned(rb *runbook) {
	t := w.t
	w.produce(w.a, "u-a", 4)
	w.waitHolds(w.b, "B, mirroring A", nil)
	w.waitNothingBehind(w.apiB, "from-a")
	w.apiB.post("/v1/mirrors/from-a/topics:pause?wait=30s", `{"topic":"orders"}`)
	tail := w.produceTail(w.a, "orders", 1, 3)

	// The tail's records, and how old the oldest is; its commit marker is
	// in the lag, but no record a failover would lose.
	out, _ := rb.run("unplanned-preview")
	wantOutput(t, "unplanned-preview", out, fmt.Sprintf("Removing would leave %d record(s) of 1 topic(s) behind (the oldest ", len(tail)))
	aOld, bAt := w.snapshot(w.a), w.snapshot(w.b)
	rb.run("unplanned-remove")
	// B's copy of orders/1 ends before the tail.
	w.wantStoppedAt(w.apiB, "from-a", aOld, bAt, &drTail{topic: "orders", partition: 1, records: len(tail)})

	// The producers write to B.
	w.produce(w.b, "u-b", 4)
	w.holds(w.b, "B, the primary", nil)
	rb.run("unplanned-published")
	// A is back, with its tail: orders/1 fails naming it; the others
	// continue. The dry run says so first.
	a1 := aOld.committed["orders"][1]
	tailStart, tailEnd := a1[len(a1)-len(tail)].Offset, a1[len(a1)-1].Offset+1
	lastMirrored := a1[len(a1)-len(tail)-1].Offset
	wantErr := fmt.Sprintf("the destination holds %d record(s) at offsets [%d, %d) past the last mirrored offset %d",
		len(tail), tailStart, tailEnd, lastMirrored)
	out, _ = rb.run("unplanned-continue-preview")
	wantOutput(t, "unplanned-continue-preview", out, fmt.Sprintf("%d in [%d, %d)", len(tail), tailStart, tailEnd))
	wantOutput(t, "unplanned-continue-preview", out, "orders/1: "+wantErr)
	wantOutput(t, "unplanned-continue-preview", out, "1 partition(s) would go FAILED")
	out, _ = rb.run("unplanned-continue")
	wantOutput(t, "unplanned-continue", out, wantErr)
	failedOne := &drTP{"orders", 1}
	w.waitHolds(w.a, "A, mirroring B but for orders/1", failedOne)
	for _, r := range drRows(t, w.apiA, "from-b") {
		state := "MIRRORING"
		if r.Topic == failedOne.topic && r.Partition == failedOne.partition {
			state = "FAILED"
			if r.Error == nil || !strings.Contains(*r.Error, wantErr) {
				t.Errorf("from-b's orders/1 error %v does not say %q", r.Error, wantErr)
			}
		}
		if r.State != state {
			t.Errorf("from-b's %s/%d is %s, want %s", r.Topic, r.Partition, r.State, state)
		}
	}
	if got := drValues(drReadAll(t, w.a, "orders", 1, true)); !slices.Equal(got, drValues(a1)) {
		t.Errorf("A's orders/1 changed while FAILED: %d records, want its %d", len(got), len(a1))
	}

	if err := kcatAvailable(); err != nil && os.Getenv("CI") == "" {
		rb.skip("unplanned-save-tail", err.Error()+" (CI installs it)")
	} else {
		rb.run("unplanned-save-tail", "TAIL_TOPIC=orders", "TAIL_PARTITION=1",
			fmt.Sprintf("TAIL_START=%d", tailStart), fmt.Sprintf("TAIL_RECORDS=%d", len(tail)))
		saved, err := os.ReadFile(filepath.Join(rb.dir, "divergent-tail.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, v := range tail {
			want = append(want, fmt.Sprintf("%d\t%s", a1[len(a1)-len(tail)+i].Offset, v))
		}
		var got []string
		for line := range strings.Lines(string(saved)) {
			off, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
			_, value, _ := strings.Cut(rest, "\t") // the key: tail records have none
			got = append(got, off+"\t"+value)
		}
		if !slices.Equal(got, want) {
			t.Errorf("divergent-tail.tsv holds %q, want %q", got, want)
		}
	}

	if _, ran := rb.run("unplanned-keep-divergent"); ran {
		// A keeps its tail, then B's records after the last mirrored one.
		want := append(drValues(a1), w.log["orders"][1][len(a1)-len(tail):]...)
		workertest.WaitFor(t, 30*time.Second, "A's orders/1 to be its tail and then B's records", func() (bool, string) {
			got := drValues(drReadAll(t, w.a, "orders", 1, true))
			return slices.Equal(got, want), fmt.Sprintf("%d records, want %d", len(got), len(want))
		})
		status, body := w.apiA.do(http.MethodGet, "/v1/partitions?mirror=from-b&topic=orders", "")
		if status != http.StatusOK || !strings.Contains(string(body), `"divergent_tail"`) {
			t.Errorf("describe of from-b's orders does not show the divergent tail: %d %s", status, body)
		}
	}

	// recreate: A's orders is B's, exactly: no tail and no aborted records.
	rb.run("unplanned-recreate")
	w.waitHolds(w.a, "A, orders recreated from B", nil)
	for p := range int32(drPartitions) {
		if got := drValues(drReadAll(t, w.a, "orders", p, false)); !slices.Equal(got, w.log["orders"][p]) {
			t.Errorf("A's orders/%d after recreate holds %d records (aborted ones included), want exactly B's %d",
				p, len(got), len(w.log["orders"][p]))
		}
	}
	w.wantRaw(w.a, "A's accounts, continued", aOld, []string{"accounts"})
}

// drTopics are the runbook's topics, drPartitions their partitions each.
var drTopics = []string{"accounts", "orders"}

const drPartitions = 2

// drWorld is what the applications wrote: log is the primary's log, per
// topic and partition (committed values, in order), which every cluster
// holds once it is mirrored; consumed counts the records the consumer
// group "readers" has read of it.
type drWorld struct {
	t          *testing.T
	a, b       string // the clusters' bootstrap addresses
	apiA, apiB apiClient
	log        map[string][][]string
	consumed   map[string][]int
	reg        drRegistries
}

type drTP struct {
	topic     string
	partition int32
}

// produce writes to the primary at addr, as its applications do: to
// orders, per partition, a committed transaction of 3 records, an aborted
// one of 2 and a committed one of 3; to accounts, per partition, n records
// keyed by three account ids, each in a request of its own (so that
// compaction has batches to drop).
func (w *drWorld) produce(addr, tag string, n int) {
	t := w.t
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx := w.ordersApp(addr)
	defer tx.Close()
	for i, size := range []int{3, 2, 3} {
		commit := i != 1
		var rs []*kgo.Record
		for p := range int32(drPartitions) {
			for j := range size {
				v := fmt.Sprintf("%s-orders-%d-tx%d-%d", tag, p, i, j)
				if !commit {
					v += "-aborted"
				}
				rs = append(rs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(v)})
			}
		}
		w.transact(ctx, tx, rs, commit)
		if commit {
			for _, r := range rs {
				w.log["orders"][r.Partition] = append(w.log["orders"][r.Partition], string(r.Value))
			}
		}
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for p := range int32(drPartitions) {
		for i := range n {
			// The last few update one account, so that compaction leaves
			// gaps between the others' last records.
			k := i % 3
			if i >= n-3 {
				k = 0
			}
			r := &kgo.Record{Topic: "accounts", Partition: p, Key: fmt.Appendf(nil, "account-%d", k),
				Value: fmt.Appendf(nil, "%s-accounts-%d-%d", tag, p, i)}
			if err := plain.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			w.log["accounts"][p] = append(w.log["accounts"][p], string(r.Value))
		}
	}
}

// produceTail writes n records to one partition in a committed transaction,
// outside the log: the records A takes after B last read it.
func (w *drWorld) produceTail(addr, topic string, p int32, n int) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx := w.ordersApp(addr)
	defer tx.Close()
	var vals []string
	var rs []*kgo.Record
	for i := range n {
		vals = append(vals, fmt.Sprintf("tail-%s-%d-%d", topic, p, i))
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(vals[i])})
	}
	w.transact(ctx, tx, rs, true)
	return vals
}

// ordersApp is the transactional producer of the applications that write
// orders, on the primary at addr.
func (w *drWorld) ordersApp(addr string) *kgo.Client {
	tx, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("orders-app"))
	if err != nil {
		w.t.Fatal(err)
	}
	return tx
}

// transact writes rs in one transaction, committed or aborted.
func (w *drWorld) transact(ctx context.Context, tx *kgo.Client, rs []*kgo.Record, commit bool) {
	if err := tx.BeginTransaction(); err != nil {
		w.t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		w.t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		w.t.Fatal(err)
	}
}

// logFromCompacted takes accounts' log from A after compaction, and checks
// that compaction left gaps in A's offsets.
func (w *drWorld) logFromCompacted() {
	t := w.t
	gaps := 0
	for p := range int32(drPartitions) {
		recs := drReadAll(t, w.a, "accounts", p, true)
		w.log["accounts"][p] = drValues(recs)
		if n := len(recs); n > 0 && recs[n-1].Offset-recs[0].Offset+1 > int64(n) {
			gaps++
		}
	}
	if gaps == 0 {
		t.Fatalf("compaction left A's accounts without gaps: %v", w.log["accounts"])
	}
}

// consume reads n records of each partition with the consumer group
// "readers" on the cluster at addr, read_committed, and commits after the
// nth as a consumer does. Each partition must start at the record after
// the last one the group read, on whichever cluster it read that, and go on
// in the log's order.
func (w *drWorld) consume(addr, cluster string, n int) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics(drTopics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // leaves the group, so that the next sync may commit for it
	got := map[drTP][]*kgo.Record{}
	enough := func() bool {
		for _, topic := range drTopics {
			for p := range int32(drPartitions) {
				if len(got[drTP{topic, p}]) < n {
					return false
				}
			}
		}
		return true
	}
	for !enough() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group readers on %s: fewer than %d records of each partition within 30s: %v", cluster, n, got)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("group readers on %s: fetch %s/%d: %v", cluster, topic, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			k := drTP{r.Topic, r.Partition}
			got[k] = append(got[k], r)
		})
	}
	var last []*kgo.Record
	var firsts []string
	for _, topic := range drTopics {
		for p := range int32(drPartitions) {
			recs := got[drTP{topic, p}][:n]
			from := w.consumed[topic][p]
			want := w.log[topic][p][from : from+n]
			if vs := drValues(recs); !slices.Equal(vs, want) {
				t.Errorf("group readers on %s, %s/%d: read %q (from offset %d), want %q: the records after the %d it had read",
					cluster, topic, p, vs, recs[0].Offset, want, from)
			}
			w.consumed[topic][p] += n
			last = append(last, recs[n-1])
			firsts = append(firsts, fmt.Sprintf("%s/%d offset %d (%q)", topic, p, recs[0].Offset, recs[0].Value))
		}
	}
	if err := cl.CommitRecords(ctx, last...); err != nil {
		t.Fatalf("group readers on %s: commit: %v", cluster, err)
	}
	t.Logf("group readers read %d record(s) of each partition on %s, from %s", n, cluster, strings.Join(firsts, ", "))
}

// drSnapshot is what a cluster holds: per topic and partition, its
// committed records and all its records (aborted ones included).
type drSnapshot struct {
	committed, raw map[string][][]*kgo.Record
}

func (w *drWorld) snapshot(addr string) drSnapshot {
	s := drSnapshot{committed: map[string][][]*kgo.Record{}, raw: map[string][][]*kgo.Record{}}
	for _, topic := range drTopics {
		for p := range int32(drPartitions) {
			s.committed[topic] = append(s.committed[topic], drReadAll(w.t, addr, topic, p, true))
			s.raw[topic] = append(s.raw[topic], drReadAll(w.t, addr, topic, p, false))
		}
	}
	return s
}

// differences says where the cluster's committed records differ from the
// log ("" when they do not), leaving skip out.
func (w *drWorld) differences(addr string, skip *drTP) string {
	var diffs []string
	for _, topic := range drTopics {
		for p := range int32(drPartitions) {
			if skip != nil && *skip == (drTP{topic, p}) {
				continue
			}
			got, want := drValues(drReadAll(w.t, addr, topic, p, true)), w.log[topic][p]
			if !slices.Equal(got, want) {
				diffs = append(diffs, fmt.Sprintf("%s/%d: %d records, want %d (%s)", topic, p, len(got), len(want), firstDifference(got, want)))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("record %d is %q, want %q", i, got[i], want[i])
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("extra from record %d: %q", len(want), got[len(want):])
	}
	return fmt.Sprintf("missing from record %d: %q", len(got), want[len(got):])
}

// holds checks now that the cluster holds exactly the log.
func (w *drWorld) holds(addr, what string, skip *drTP) {
	w.t.Helper()
	if d := w.differences(addr, skip); d != "" {
		w.t.Fatalf("%s: %s", what, d)
	}
}

// waitHolds waits until the cluster holds exactly the log.
func (w *drWorld) waitHolds(addr, what string, skip *drTP) {
	w.t.Helper()
	workertest.WaitFor(w.t, 30*time.Second, what+" to hold exactly the log", func() (bool, string) {
		d := w.differences(addr, skip)
		return d == "", d
	})
}

// wantRaw checks what a cluster that mirrors holds of the topics, aborted
// records included: what it held when it stopped being the primary (old),
// then exactly the log's records since, copied once each and no aborted
// one. So its record count is its old count plus the other's new records.
func (w *drWorld) wantRaw(addr, what string, old drSnapshot, topics []string) {
	t := w.t
	t.Helper()
	for _, topic := range topics {
		for p := range int32(drPartitions) {
			var oldRaw []string
			oldCommitted := 0
			if old.raw != nil {
				oldRaw, oldCommitted = drValues(old.raw[topic][p]), len(old.committed[topic][p])
			}
			added := w.log[topic][p][oldCommitted:]
			want := append(slices.Clip(oldRaw), added...)
			got := drValues(drReadAll(t, addr, topic, p, false))
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s/%d: %d records in all, want its %d then the other's %d new ones (%s)",
					what, topic, p, len(got), len(oldRaw), len(added), firstDifference(got, want))
			}
		}
	}
}

// wantCompacted checks that the mirror created the topic on B compacted,
// as on A.
func (w *drWorld) wantCompacted(addr, topic string) {
	t := w.t
	adm, err := workertest.Plain(addr).NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Configs {
		if kv.Key == "cleanup.policy" && kv.MaybeValue() == "compact" {
			return
		}
	}
	t.Errorf("%s on %s is not compacted", topic, addr)
}

// drRow is the part of a describe row the test reads.
type drRow struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	State           string  `json:"state"`
	Error           *string `json:"error"`
	LastMirroredSrc *int64  `json:"last_mirrored_source_offset"`
	LastMirroredDst *int64  `json:"last_mirrored_destination_offset"`
	SourceOffset    *int64  `json:"source_offset"`
	DestOffset      *int64  `json:"destination_offset"`
	Lag             *int64  `json:"lag"`
}

// wantDescribeCurrent: right after a continue's --wait said every
// partition is MIRRORING, describe shows ends: the source's as it is now
// (nothing writes to it meanwhile), not "-" or the ends of the mirror's
// previous run, and a lag between 0 and that end.
func (w *drWorld) wantDescribeCurrent(c apiClient, mirror, source, what string) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ends, err := newAdmin(t, source).ListCommittedOffsets(ctx, drTopics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range drRows(t, c, mirror) {
		end, ok := ends.Lookup(r.Topic, r.Partition)
		if !ok || end.Err != nil {
			t.Fatalf("%s: listing %s/%d's end: %v", what, r.Topic, r.Partition, end.Err)
		}
		if r.State != "MIRRORING" || r.SourceOffset == nil || *r.SourceOffset != end.Offset || r.DestOffset == nil ||
			r.Lag == nil || *r.Lag < 0 || *r.Lag > end.Offset {
			t.Errorf("%s: describe of %s/%s/%d right after the wait: %s, source %s, destination %s, lag %s; want MIRRORING, source %d (the source's end now)",
				what, mirror, r.Topic, r.Partition, r.State, offsetOrDash(r.SourceOffset), offsetOrDash(r.DestOffset), offsetOrDash(r.Lag), end.Offset)
		}
	}
}

func drRows(t *testing.T, c apiClient, mirror string) []drRow {
	t.Helper()
	status, body := c.do(http.MethodGet, "/v1/partitions?mirror="+mirror, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/partitions?mirror=%s: %d %s", mirror, status, body)
	}
	var out struct {
		Partitions []drRow `json:"partitions"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Partitions
}

// failedPartitions lists both deployments' FAILED partitions with their
// errors.
func (w *drWorld) failedPartitions() string {
	var out []string
	for _, d := range []struct {
		name, mirror string
		api          apiClient
	}{{"kmirror-A", "from-b", w.apiA}, {"kmirror-B", "from-a", w.apiB}} {
		for _, r := range drRows(w.t, d.api, d.mirror) {
			if r.State == "FAILED" {
				out = append(out, fmt.Sprintf("%s: %s/%s/%d is FAILED: %s", d.name, d.mirror, r.Topic, r.Partition, ptrString(r.Error)))
			}
		}
	}
	if len(out) == 0 {
		return "no partition is FAILED"
	}
	return strings.Join(out, "\n")
}

// drTail is a partition's records on the source that its destination never
// got.
type drTail struct {
	topic     string
	partition int32
	records   int
}

// wantStoppedAt checks that every partition of the mirror is STOPPED with
// its last mirrored offsets at the last committed records of the source
// (src) and the destination (dst); but for a tail, whose records the
// destination never got.
func (w *drWorld) wantStoppedAt(c apiClient, mirror string, src, dst drSnapshot, tail *drTail) {
	t := w.t
	t.Helper()
	rs := drRows(t, c, mirror)
	if len(rs) != len(drTopics)*drPartitions {
		t.Fatalf("%s has %d partitions, want %d", mirror, len(rs), len(drTopics)*drPartitions)
	}
	for _, r := range rs {
		s, d := src.committed[r.Topic][r.Partition], dst.committed[r.Topic][r.Partition]
		if tail != nil && tail.topic == r.Topic && tail.partition == r.Partition {
			s = s[:len(s)-tail.records]
		}
		wantSrc, wantDst := s[len(s)-1].Offset, d[len(d)-1].Offset
		if r.State != "STOPPED" || r.LastMirroredSrc == nil || *r.LastMirroredSrc != wantSrc ||
			r.LastMirroredDst == nil || *r.LastMirroredDst != wantDst {
			t.Errorf("%s's %s/%d: %s, last mirrored %s → %s; want STOPPED, %d → %d",
				mirror, r.Topic, r.Partition, r.State, ptrString(r.LastMirroredSrc), ptrString(r.LastMirroredDst), wantSrc, wantDst)
		}
	}
}

// waitNothingBehind waits until the failover preview of the mirror's
// topics leaves nothing behind: its lag is against the source's end read
// now and the checkpoints, where describe's may be a moment old.
func (w *drWorld) waitNothingBehind(c apiClient, mirror string) {
	workertest.WaitFor(w.t, 30*time.Second, mirror+"'s failover preview to leave nothing behind", func() (bool, string) {
		status, body := c.do(http.MethodPost, "/v1/mirrors/"+mirror+"/topics:remove?dry_run=true", `{"topic":"orders|accounts"}`)
		if status != http.StatusOK {
			return false, fmt.Sprintf("%d %s", status, body)
		}
		var preview struct {
			Failover []struct {
				Topic string `json:"topic"`
				Lag   int64  `json:"lag"`
			} `json:"failover"`
		}
		if err := json.Unmarshal(body, &preview); err != nil {
			return false, err.Error()
		}
		var lags []string
		behind := int64(0)
		for _, t := range preview.Failover {
			behind += t.Lag
			lags = append(lags, fmt.Sprintf("%s=%d", t.Topic, t.Lag))
		}
		return behind == 0 && len(preview.Failover) == len(drTopics), strings.Join(lags, " ")
	})
}

func wantOutput(t *testing.T, step, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("runbook step %s did not print %q", step, want)
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// drReadAll reads every record of a partition, from its log start to its
// end (the last stable offset when committed). It follows the transaction
// markers too, so it knows it has read to the end when a log ends in one
// rather than waiting for a quiet poll.
func drReadAll(t *testing.T, addr, topic string, p int32, committed bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm, err := workertest.Plain(addr).NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	off, err := kafkaconn.ReadOffsets(ctx, adm, topic, p, committed)
	if err != nil {
		t.Fatalf("offsets of %s/%d at %s: %v", topic, p, addr, err)
	}
	if off.End <= off.Start {
		return nil
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.KeepControlRecords(), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(off.Start)}})}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	next := off.Start
	for next < off.End {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s/%d at %s: at offset %d of [%d, %d) after 20s", topic, p, addr, next, off.Start, off.End)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("reading %s/%d at %s: %v", topic, p, addr, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= off.End {
				return
			}
			next = r.Offset + 1
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// drValues are the records' values, in order.
func drValues(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}
