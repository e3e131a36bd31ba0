package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"kmirror/api"
)

func TestListPartitionsFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")
	// A worker would set states; here SQL stands in for it.
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 5, dst_next = 5,
		source_end_offset = 8, destination_end_offset = 5 WHERE partition = 1`); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(t)

	var l api.PartitionList
	ok(t, e.do(t, "GET", "/v1/partitions?state=MIRRORING", nil), http.StatusOK, &l)
	if got := partitionKeys(l); !slices.Equal(got, []string{"orders/1"}) {
		t.Fatalf("MIRRORING partitions %v", got)
	}
	if p := l.Partitions[0]; p.Lag == nil || *p.Lag != 3 || *p.SourceOffset != 8 || *p.DestinationOffset != 5 {
		t.Fatalf("describe row %+v: want lag 3 = 8 - 5", p)
	}
	ok(t, e.do(t, "GET", "/v1/partitions?state=UNKNOWN", nil), http.StatusOK, &l)
	if got := partitionKeys(l); !slices.Equal(got, []string{"orders/0", "orders/2"}) {
		t.Fatalf("UNKNOWN partitions %v", got)
	}

	for _, c := range []struct {
		query, kind string
		status      int
		details     []string
	}{
		{"?state=BOGUS", "validation", 400, []string{`"BOGUS" is not a partition state`, "UNKNOWN", "MIRRORING"}},
		{"?topic=(", "validation", 400, []string{"topic", "invalid regular expression"}},
		{"?mirror=bad%20name", "validation", 400, []string{`"bad name"`}},
		{"?mirror=unknown", "not-found", 404, []string{"mirror unknown does not exist"}},
	} {
		wantProblem(t, e.do(t, "GET", "/v1/partitions"+c.query, nil), c.status, c.kind, c.details...)
	}
	e.unchanged(t, before)
}

// TestTranslate checks the translate endpoint against offset-map runs
// written directly, as a worker would: source 10..19 → destination 0..9,
// then (after 5 records that were never mirrored) source 25..29 → 10..14.
func TestTranslate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count)
		VALUES ('m1', 'orders', 0, 10, 0, 10), ('m1', 'orders', 0, 25, 10, 5)`); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(t)
	path := func(p, query string) string {
		return "/v1/mirrors/m1/topics/orders/partitions/" + p + "/translate" + query
	}
	for _, c := range []struct {
		src, dst int64
		exact    bool
	}{
		{10, 0, true},   // first mirrored record
		{15, 5, true},   // inside a run
		{19, 9, true},   // last record of the first run
		{20, 10, false}, // in the gap: rounds to the earlier side
		{24, 10, false},
		{25, 10, true}, // first record of the second run
		{29, 14, true},
		{30, 15, false},   // the end of what is mirrored
		{1000, 15, false}, // never past it
		{3, 0, false},     // before the first run
		{0, 0, false},
	} {
		var tr api.Translation
		ok(t, e.do(t, "GET", path("0", fmt.Sprintf("?source_offset=%d", c.src)), nil), http.StatusOK, &tr)
		if tr.SourceOffset != c.src || tr.DestinationOffset != c.dst || tr.Exact != c.exact {
			t.Errorf("translate %d = %+v, want destination %d exact %v", c.src, tr, c.dst, c.exact)
		}
	}

	for _, c := range []struct {
		path, kind string
		status     int
		details    []string
	}{
		{path("1", "?source_offset=5"), "not-found", 404, []string{"nothing of orders/1 has been mirrored"}},
		{path("7", "?source_offset=5"), "not-found", 404, []string{"no partition 7"}},
		{"/v1/mirrors/m1/topics/payments/partitions/0/translate?source_offset=5", "not-found", 404, []string{"mirror m1 has no topic payments"}},
		{path("0", "?source_offset=abc"), "validation", 400, []string{"source_offset"}},
		{path("0", ""), "validation", 400, []string{"source_offset", "required"}},
		{path("0", "?source_offset=-1"), "validation", 400, []string{"source_offset", ">= 0"}},
		{path("0", "?source_offset=1.5"), "validation", 400, []string{"source_offset"}},
		{path("-1", "?source_offset=1"), "validation", 400, []string{"partition", "non-negative"}},
		{path("x", "?source_offset=x"), "validation", 400, []string{"partition", "source_offset"}},
	} {
		wantProblem(t, e.do(t, "GET", c.path, nil), c.status, c.kind, c.details...)
	}
	e.unchanged(t, before)
}

// TestTopicSummaries: the topic list counts partitions by state and sums
// their lag in SQL; the topic detail counts its describe rows. Both agree
// with the rows: an unknown source end adds no lag, and a checkpoint past
// it adds none either.
func TestTopicSummaries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders|payments")
	for _, sql := range []string{
		`UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 5, dst_next = 5, source_end_offset = 8 WHERE topic = 'orders' AND partition = 0`,
		`UPDATE mirror_partitions SET state = 'FAILED', source_end_offset = 4 WHERE topic = 'orders' AND partition = 1`,
		`UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 10, dst_next = 10, source_end_offset = 7 WHERE topic = 'payments'`,
	} {
		if _, err := e.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]struct {
		states api.PartitionStateCounts
		lag    int64
	}{
		"orders":   {api.PartitionStateCounts{Mirroring: 1, Failed: 1, Unknown: 1}, 3 + 4},
		"payments": {api.PartitionStateCounts{Mirroring: 1}, 0},
	}
	var list api.TopicList
	ok(t, e.do(t, "GET", "/v1/mirrors/m1/topics", nil), http.StatusOK, &list)
	if len(list.Topics) != len(want) {
		t.Fatalf("topics %+v", list.Topics)
	}
	for _, tp := range list.Topics {
		var detail api.TopicDetail
		ok(t, e.do(t, "GET", "/v1/mirrors/m1/topics/"+tp.Topic, nil), http.StatusOK, &detail)
		w := want[tp.Topic]
		for what, got := range map[string]api.Topic{"list": tp, "detail": detail.Topic} {
			if got.States != w.states || got.Lag != w.lag {
				t.Errorf("%s of %s: states %v lag %d, want %v lag %d", what, tp.Topic, got.States, got.Lag, w.states, w.lag)
			}
		}
	}
}
