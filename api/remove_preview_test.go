package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/api"
	"kmirror/internal/testing/testnet"
)

// produceAt produces records with the given timestamps to one partition of
// the env's source cluster; with txn they go in one transaction, committed
// or aborted.
func (e *env) produceAt(t *testing.T, topic string, partition int32, stamps []time.Time, txn string, commit bool) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if txn != "" {
		opts = append(opts, kgo.TransactionalID(txn))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	for i, ts := range stamps {
		r := &kgo.Record{Topic: topic, Partition: partition, Timestamp: ts, Value: []byte{byte(i)}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, partition, err)
		}
	}
	if txn != "" {
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
}

// stamps returns n timestamps a millisecond apart from base.
func stamps(base time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = base.Add(time.Duration(i) * time.Millisecond)
	}
	return out
}

// TestRemoveTopicsDryRun: topics:remove?dry_run=true answers, per
// partition, the lag against the source's end read now and the timestamp
// of the newest record not copied, and writes nothing.
func TestRemoveTopicsDryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders|payments")

	base := time.Date(2026, 12, 4, 17, 20, 0, 0, time.UTC)
	// orders/0 stays empty; orders/1 holds 12 records of which 2 are
	// mirrored; orders/2 holds 5, all mirrored.
	e.produceAt(t, "orders", 1, stamps(base, 12), "", false)
	e.produceAt(t, "orders", 2, stamps(base, 5), "", false)
	e.exec(t, `UPDATE mirror_partitions SET state = 'MIRRORING', src_next = $2, dst_next = $2
		WHERE mirror = 'm1' AND topic = 'orders' AND partition = $1`, 1, 2)
	e.exec(t, `UPDATE mirror_partitions SET state = 'MIRRORING', src_next = $2, dst_next = $2
		WHERE mirror = 'm1' AND topic = 'orders' AND partition = $1`, 2, 5)
	// payments/0, never mirrored: 3 plain records (0-2), a committed
	// transaction (3-4, marker 5), an aborted one (6-7, marker 8). The
	// newest record not copied is 4, behind two markers.
	tx := base.Add(time.Minute)
	e.produceAt(t, "payments", 0, stamps(base, 3), "", false)
	e.produceAt(t, "payments", 0, stamps(tx, 2), "t1", true)
	e.produceAt(t, "payments", 0, stamps(tx.Add(time.Hour), 2), "t2", false)

	before := e.snapshot(t)
	var res api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove?dry_run=true", map[string]any{"topic": "orders|payments"}), http.StatusOK, &res)
	if res.Mirror != "m1" || res.Action != "remove" || !slices.Equal(res.Topics, []string{"orders", "payments"}) ||
		len(res.Failover) != 2 || res.Wait != nil {
		t.Fatalf("dry run: %+v", res)
	}
	type want struct {
		state          api.PartitionState
		next, end      int64
		newest, oldest *time.Time
	}
	at := func(ts time.Time) *time.Time { return &ts }
	check := func(f api.TopicFailoverPreview, topic string, lag int64, rows []want) {
		t.Helper()
		if f.Topic != topic || f.Lag != lag || len(f.Partitions) != len(rows) {
			t.Fatalf("%s: %+v", topic, f)
		}
		for i, w := range rows {
			p := f.Partitions[i]
			wantLag := w.end - w.next
			if p.Partition != int32(i) || p.State != w.state || p.NextOffset != w.next ||
				p.SourceEndOffset == nil || *p.SourceEndOffset != w.end || p.Lag == nil || *p.Lag != wantLag ||
				(p.NewestNotCopied == nil) != (w.newest == nil) || (w.newest != nil && !p.NewestNotCopied.Equal(*w.newest)) {
				t.Fatalf("%s/%d: %+v (newest %v), want %+v (newest %v)", topic, i, p, p.NewestNotCopied, w, w.newest)
			}
			// The oldest data record not copied, and its age when asked.
			if (p.OldestNotCopied == nil) != (w.oldest == nil) || (w.oldest != nil && !p.OldestNotCopied.Equal(*w.oldest)) ||
				(p.OldestNotCopiedAgeMs == nil) != (w.oldest == nil) ||
				(w.oldest != nil && (*p.OldestNotCopiedAgeMs > time.Since(*w.oldest).Milliseconds() ||
					*p.OldestNotCopiedAgeMs < time.Since(*w.oldest).Milliseconds()-60_000)) {
				t.Fatalf("%s/%d: oldest not copied %v (age %v ms), want %v", topic, i, p.OldestNotCopied, p.OldestNotCopiedAgeMs, w.oldest)
			}
		}
	}
	check(res.Failover[0], "orders", 10, []want{
		{api.PartitionStateUnknown, 0, 0, nil, nil},
		{api.PartitionStateMirroring, 2, 12, at(base.Add(11 * time.Millisecond)), at(base.Add(2 * time.Millisecond))},
		{api.PartitionStateMirroring, 5, 5, nil, nil},
	})
	check(res.Failover[1], "payments", 9, []want{{api.PartitionStateUnknown, 0, 9, at(tx.Add(time.Millisecond)), at(base)}})

	// Nothing written: no desired-state change, no event, no outbox row.
	e.unchanged(t, before)
	if s := e.desiredState(t, "m1", "orders"); s != "mirroring" {
		t.Fatalf("orders is %s after a dry run", s)
	}

	// The errors of a real remove, still writing nothing.
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove?dry_run=true", map[string]any{"topic": "(orders"}),
		http.StatusBadRequest, "validation", "topic")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove?dry_run=true", map[string]any{"topic": "nothing.*"}),
		http.StatusNotFound, "no-match")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove?dry_run=maybe", map[string]any{"topic": "orders"}),
		http.StatusBadRequest, "validation", "dry_run")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope/topics:remove?dry_run=true", map[string]any{"topic": "orders"}),
		http.StatusNotFound, "not-found")
	e.unchanged(t, before)
	e.topicsAction(t, "m1", "remove", "payments")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove?dry_run=true", map[string]any{"topic": "orders|payments"}),
		http.StatusConflict, "conflict", "payments is stopped")

	// A real remove carries no preview.
	r := e.do(t, "POST", "/v1/mirrors/m1/topics:remove", map[string]any{"topic": "orders"})
	ok(t, r, http.StatusOK, &res)
	if res.Failover != nil {
		t.Fatalf("remove result has a preview: %s", r.body)
	}
}

// TestRemoveTopicsDryRunSourceDown: a source that stops answering makes the
// preview a 503 source-unavailable naming the cluster, within the source
// timeout, and nothing changes.
func TestRemoveTopicsDryRunSourceDown(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{sourceTimeout: time.Second})
	proxy := testnet.NewProxy(t, strings.Split(e.bootstrap, ",")[0])
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{
		"name": "m1", "source": map[string]any{"bootstrap_servers": proxy.Addr()}}), http.StatusCreated, nil)
	e.topicsAction(t, "m1", "add", "orders")

	proxy.Cut(testnet.Hang)
	before := e.snapshot(t)
	start := time.Now()
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:remove?dry_run=true", map[string]any{"topic": "orders"}),
		http.StatusServiceUnavailable, "source-unavailable", proxy.Addr(), "1s")
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the preview took %s with a 1s source timeout", took)
	}
	e.unchanged(t, before)
}
