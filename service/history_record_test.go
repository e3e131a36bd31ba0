package service

import (
	"testing"
	"time"

	"kmirror/repo"
)

// TestHistoryRecord checks the arithmetic of samples taken at chosen
// times: rates from the src_next delta over the time between samples,
// floored at 0, 0 on a series' first point, totals summing their topics,
// vanished series dropped, and at most Window/Interval points kept.
func TestHistoryRecord(t *testing.T) {
	t.Parallel()
	h := &History{cfg: HistoryConfig{Interval: time.Second, Window: 3 * time.Second},
		series: map[seriesKey]*progressSeries{}}
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type row = repo.TopicProgress

	h.record(at(0), []row{{Mirror: "m", Topic: "a", SrcNext: 100, Lag: 5}, {Mirror: "e"}})
	if r := h.Rate("m", "a"); r != 0 {
		t.Fatalf("first point rate %v, want 0", r)
	}
	// 2 s later: a moved 50 (25/s); b is new (0 until its second point).
	h.record(at(2), []row{{Mirror: "m", Topic: "a", SrcNext: 150, Lag: 3}, {Mirror: "m", Topic: "b", SrcNext: 1000, Lag: 1}, {Mirror: "e"}})
	if r := h.Rate("m", "a"); r != 25 {
		t.Fatalf("rate of a %v, want 25", r)
	}
	if r := h.Rate("m", "b"); r != 0 {
		t.Fatalf("rate of new b %v, want 0", r)
	}
	// 0.5 s later: a was recreated (backwards: 0), b moved 10 (20/s).
	h.record(at(2.5), []row{{Mirror: "m", Topic: "a", SrcNext: 0, Lag: 0}, {Mirror: "m", Topic: "b", SrcNext: 1010, Lag: 2}, {Mirror: "e"}})
	if ra, rb, rm := h.Rate("m", "a"), h.Rate("m", "b"), h.Rate("m", ""); ra != 0 || rb != 20 || rm != 20 {
		t.Fatalf("rates a %v b %v total %v, want 0 20 20", ra, rb, rm)
	}
	series, ok := h.Mirror("m")
	if !ok || len(series) != 3 || series[0].Topic != "" || series[1].Topic != "a" || series[2].Topic != "b" {
		t.Fatalf("series of m: %+v", series)
	}
	total := series[0].Points
	if len(total) != 3 || total[0].Lag != 5 || total[1].Lag != 4 || total[1].RecordsPerSec != 25 || total[2].Lag != 2 {
		t.Fatalf("total points %+v", total)
	}
	if e, ok := h.Mirror("e"); !ok || len(e) != 1 || len(e[0].Points) != 3 {
		t.Fatalf("a mirror with no partitions keeps a total: %+v %v", e, ok)
	}

	// b disappears (removed), so does mirror e; a fourth point pushes the
	// first out (Window/Interval = 3).
	h.record(at(3.5), []row{{Mirror: "m", Topic: "a", SrcNext: 10, Lag: 0}})
	series, _ = h.Mirror("m")
	if len(series) != 2 || series[1].Topic != "a" {
		t.Fatalf("after b went: %+v", series)
	}
	if pts := series[1].Points; len(pts) != 3 || pts[2].RecordsPerSec != 10 || !pts[0].At.Equal(at(2).UTC().Truncate(time.Millisecond)) {
		t.Fatalf("points of a %+v", pts)
	}
	if _, ok := h.Mirror("e"); ok {
		t.Fatal("mirror e is still served after it went")
	}
	if totals := h.Totals(); len(totals) != 1 || totals[0].Mirror != "m" {
		t.Fatalf("totals %+v", totals)
	}
	// A point older than the window goes even below the count.
	h.record(at(10), []row{{Mirror: "m", Topic: "a", SrcNext: 10}})
	if series, _ = h.Mirror("m"); len(series[1].Points) != 1 {
		t.Fatalf("after a gap longer than the window: %+v", series[1].Points)
	}

	var none *History
	if none.Rate("m", "") != 0 || len(none.Totals()) != 0 {
		t.Fatal("a nil History is not empty")
	}
	if _, ok := none.Mirror("m"); ok {
		t.Fatal("a nil History knows a mirror")
	}
}
