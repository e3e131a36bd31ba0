package service_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/testing/syncbuf"
	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

// historyWorld is a Service over a fresh database with a History sampling
// it every interval, and mirror m1 mirroring orders (3 partitions) and
// payments (1) from an in-process source.
func historyWorld(t *testing.T, interval time.Duration) (*service.Control, *service.History, *pgxpool.Pool, *syncbuf.Buffer) {
	t.Helper()
	pool := testdb.Pool(t)
	kafka, err := kfake.NewCluster(kfake.SeedTopics(3, "orders"), kfake.SeedTopics(1, "payments"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	h, err := service.NewHistory(service.HistoryConfig{Pool: pool, Logger: log, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(2 * time.Second),
		Logger: log, History: h})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m1",
		Source: service.SourceInput{BootstrapServers: strings.Join(kafka.ListenAddrs(), ",")}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders|payments"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return svc, h, pool, logs
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitSeries polls the history of mirror m1 until cond holds of its series
// (total first, then orders and payments), or fails after 10s.
func waitSeries(t *testing.T, svc *service.Control, what string, cond func(total, orders service.ProgressSeries) bool) (service.ProgressSeries, service.ProgressSeries) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last []service.ProgressSeries
	for time.Now().Before(deadline) {
		h, err := svc.ProgressHistory(t.Context(), "m1")
		if err != nil {
			t.Fatal(err)
		}
		last = h.Series
		if len(last) == 3 && cond(last[0], last[1]) {
			return last[0], last[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("history never showed %s; last series %+v", what, last)
	return service.ProgressSeries{}, service.ProgressSeries{}
}

func lastPoint(s service.ProgressSeries) service.ProgressPoint {
	if len(s.Points) == 0 {
		return service.ProgressPoint{At: time.Time{}, Lag: -1, RecordsPerSec: -1}
	}
	return s.Points[len(s.Points)-1]
}

// TestHistoryRateAndLag samples checkpoints written to Postgres: lag is the
// summed per-partition lag, and the rate is how far src_next moved between
// two samples over the time between them, never negative.
func TestHistoryRateAndLag(t *testing.T) {
	t.Parallel()
	svc, h, pool, _ := historyWorld(t, 100*time.Millisecond)

	// orders: lag 5 + 5 + 5; payments has no known end: lag 0.
	exec(t, pool, `UPDATE mirror_partitions SET src_next = 10, dst_next = 10, source_end_offset = 15
		WHERE mirror = 'm1' AND topic = 'orders'`)
	total, orders := waitSeries(t, svc, "orders lag 15", func(total, orders service.ProgressSeries) bool {
		return lastPoint(orders).Lag == 15 && lastPoint(total).Lag == 15
	})
	if total.Mirror != "m1" || total.Topic != "" || orders.Topic != "orders" {
		t.Fatalf("series order: total %+v, orders %+v", total, orders)
	}

	// 300 records mirrored; partition 2's end is behind its src_next, which
	// counts 0, not -10.
	exec(t, pool, `UPDATE mirror_partitions SET src_next = 110, dst_next = 110,
		source_end_offset = CASE partition WHEN 2 THEN 100 ELSE 112 END
		WHERE mirror = 'm1' AND topic = 'orders'`)
	total, orders = waitSeries(t, svc, "orders lag 4", func(_, orders service.ProgressSeries) bool {
		return lastPoint(orders).Lag == 4
	})
	// The first point with lag 4 is the one after the move.
	var i int
	for i = range orders.Points {
		if orders.Points[i].Lag == 4 {
			break
		}
	}
	if i == 0 {
		t.Fatalf("no point before the move: %+v", orders.Points)
	}
	prev, cur := orders.Points[i-1], orders.Points[i]
	elapsed := cur.At.Sub(prev.At).Seconds()
	// At is kept to the millisecond and the sampler divides by its own
	// clock, so the interval it used is elapsed ± 1 ms; the rate is 300
	// over that, within 5%.
	lo, hi := 300/(elapsed+0.001)*0.95, 300/max(elapsed-0.001, 0.0001)*1.05
	if cur.RecordsPerSec < lo || cur.RecordsPerSec > hi {
		t.Fatalf("rate %.1f/s after 300 records in %.3fs, want %.1f-%.1f/s", cur.RecordsPerSec, elapsed, lo, hi)
	}
	for _, p := range total.Points {
		if p.At.Equal(cur.At) && p.RecordsPerSec != cur.RecordsPerSec {
			t.Fatalf("total rate %v at the move, want the orders rate %v (payments did not move)", p.RecordsPerSec, cur.RecordsPerSec)
		}
	}

	// A recreate moves src_next back: the rate is 0, never negative.
	exec(t, pool, `UPDATE mirror_partitions SET src_next = 0, dst_next = 0 WHERE mirror = 'm1' AND topic = 'orders'`)
	_, orders = waitSeries(t, svc, "the recreate", func(_, orders service.ProgressSeries) bool {
		return lastPoint(orders).Lag == 112+112+100
	})
	for _, p := range orders.Points {
		if p.RecordsPerSec < 0 {
			t.Fatalf("negative rate in %+v", orders.Points)
		}
	}

	// A topic that goes drops out.
	exec(t, pool, `DELETE FROM mirror_topics WHERE mirror = 'm1' AND topic = 'payments'`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		hist, err := svc.ProgressHistory(t.Context(), "m1")
		if err != nil {
			t.Fatal(err)
		}
		if len(hist.Series) == 2 && hist.Series[1].Topic == "orders" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("payments never dropped out: %+v", hist.Series)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Frozen, the views carry the last sampled rates.
	h.Stop()
	hist, err := svc.ProgressHistory(t.Context(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	topic, err := svc.GetTopic(t.Context(), "m1", "orders")
	if err != nil {
		t.Fatal(err)
	}
	m, err := svc.GetMirror(t.Context(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	if topic.RecordsPerSec != lastPoint(hist.Series[1]).RecordsPerSec || m.Status.RecordsPerSec != lastPoint(hist.Series[0]).RecordsPerSec {
		t.Fatalf("topic rate %v, mirror rate %v; last points %+v", topic.RecordsPerSec, m.Status.RecordsPerSec, hist.Series)
	}
	if m.Status.Lag != 324 || m.Status.Topics != 1 || m.Status.Partitions != 3 || m.Status.States["UNKNOWN"] != 3 {
		t.Fatalf("mirror status %+v", m.Status)
	}
}

// TestHistoryServesLastKnownWhenDatabaseDown: samples that fail are skipped
// and logged; the history and rates keep answering from memory.
func TestHistoryServesLastKnownWhenDatabaseDown(t *testing.T) {
	t.Parallel()
	svc, _, pool, logs := historyWorld(t, 50*time.Millisecond)
	exec(t, pool, `UPDATE mirror_partitions SET src_next = 1, dst_next = 1, source_end_offset = 3
		WHERE mirror = 'm1' AND topic = 'orders'`)
	waitSeries(t, svc, "orders lag 6", func(_, orders service.ProgressSeries) bool {
		return lastPoint(orders).Lag == 6
	})

	pool.Close() // every sample from now on fails
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "progress sample failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no failed sample logged:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the failed sample is not a warning:\n%s", logs)
	}
	h, err := svc.ProgressHistory(t.Context(), "m1")
	if err != nil {
		t.Fatalf("history with the database down: %v", err)
	}
	if len(h.Series) != 3 || lastPoint(h.Series[1]).Lag != 6 {
		t.Fatalf("history with the database down: %+v", h.Series)
	}
	all, err := svc.ProgressHistory(t.Context(), "")
	if err != nil || len(all.Series) != 1 || all.Series[0].Mirror != "m1" || lastPoint(all.Series[0]).Lag != 6 {
		t.Fatalf("totals with the database down: %+v (%v)", all.Series, err)
	}
}
