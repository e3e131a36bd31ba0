package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"kmirror/api"
	"kmirror/service"
)

// pageRow is a describe row's key and state, as a test compares them.
type pageRow struct {
	mirror, topic string
	partition     int32
	state         string // "UNKNOWN" for no state
}

func (r pageRow) String() string { return fmt.Sprintf("%s/%s/%d", r.mirror, r.topic, r.partition) }

// pagesDataset writes two mirrors' partitions straight into the tables (as
// an add and the workers would) and returns them: mirror a with orders (7
// partitions), orders.v2 (5) and payments (4), mirror b with orders-eu (6).
// Partition p's state cycles MIRRORING, UNKNOWN, FAILED.
func pagesDataset(t *testing.T, e *env) []pageRow {
	t.Helper()
	topics := []struct {
		mirror, topic string
		partitions    int32
	}{{"a", "orders", 7}, {"a", "orders.v2", 5}, {"a", "payments", 4}, {"b", "orders-eu", 6}}
	states := []string{"MIRRORING", "UNKNOWN", "FAILED"}
	var rows []pageRow
	for _, m := range []string{"a", "b"} {
		e.createMirror(t, m)
	}
	for _, tp := range topics {
		if _, err := e.pool.Exec(t.Context(), `INSERT INTO mirror_topics (mirror, topic, desired_state)
			VALUES ($1, $2, 'mirroring')`, tp.mirror, tp.topic); err != nil {
			t.Fatal(err)
		}
		for p := range tp.partitions {
			r := pageRow{mirror: tp.mirror, topic: tp.topic, partition: p, state: states[int(p)%len(states)]}
			e.insertPartition(t, r)
			rows = append(rows, r)
		}
	}
	return rows
}

func (e *env) insertPartition(t *testing.T, r pageRow) {
	t.Helper()
	var state *string
	if r.state != "UNKNOWN" {
		state = &r.state
	}
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO mirror_partitions (mirror, topic, partition, state)
		VALUES ($1, $2, $3, $4)`, r.mirror, r.topic, r.partition, state); err != nil {
		t.Fatal(err)
	}
}

// page is one GET /v1/partitions answer: its rows, its next_cursor, and
// whether the body carried the field at all.
type page struct {
	rows       []pageRow
	next       string
	nextInBody bool
}

func (e *env) partitionsPage(t *testing.T, query url.Values) page {
	t.Helper()
	r := e.do(t, "GET", "/v1/partitions?"+query.Encode(), nil)
	var l api.PartitionList
	ok(t, r, http.StatusOK, &l)
	p := page{next: l.NextCursor, nextInBody: strings.Contains(string(r.body), `"next_cursor"`)}
	for _, row := range l.Partitions {
		p.rows = append(p.rows, pageRow{row.Mirror, row.Topic, row.Partition, string(row.State)})
	}
	return p
}

// walk reads every page of query at limit, checking that each page but the
// last is full and that only the last has no next_cursor. between, when
// set, runs after each page but the last, with the page's last row.
func (e *env) walk(t *testing.T, query url.Values, limit int, between func(page int, last pageRow)) []pageRow {
	t.Helper()
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(limit))
	var all []pageRow
	for n := 0; ; n++ {
		if n > 1000 {
			t.Fatalf("%s: more than 1000 pages", q.Encode())
		}
		p := e.partitionsPage(t, q)
		all = append(all, p.rows...)
		if p.next == "" {
			if p.nextInBody {
				t.Fatalf("%s: the last page carries an empty next_cursor; want it left out", q.Encode())
			}
			if len(p.rows) > limit {
				t.Fatalf("%s: last page of %d rows", q.Encode(), len(p.rows))
			}
			return all
		}
		if len(p.rows) != limit {
			t.Fatalf("%s: page %d has %d rows and a next_cursor; want %d", q.Encode(), n, len(p.rows), limit)
		}
		if between != nil {
			between(n, p.rows[len(p.rows)-1])
		}
		q.Set("cursor", p.next)
	}
}

// TestListPartitionsPages: at every page size, following next_cursor reads
// exactly the rows one large page holds, in the same order, with no gap and
// no duplicate, alone and combined with each filter; the rows are those the
// filter selects, ordered by mirror, topic and partition. (The dataset's
// names sort the same under any collation.)
func TestListPartitionsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	all := pagesDataset(t, e)

	for _, c := range []struct {
		query string
		want  func(pageRow) bool
	}{
		{"", func(pageRow) bool { return true }},
		{"mirror=a", func(r pageRow) bool { return r.mirror == "a" }},
		{"mirror=b", func(r pageRow) bool { return r.mirror == "b" }},
		{"topic=orders.*", func(r pageRow) bool { return strings.HasPrefix(r.topic, "orders") }},
		{"topic=orders", func(r pageRow) bool { return r.topic == "orders" }},
		{"state=FAILED", func(r pageRow) bool { return r.state == "FAILED" }},
		{"state=unknown", func(r pageRow) bool { return r.state == "UNKNOWN" }},
		{"mirror=a&topic=orders.*&state=MIRRORING", func(r pageRow) bool {
			return r.mirror == "a" && strings.HasPrefix(r.topic, "orders") && r.state == "MIRRORING"
		}},
		{"topic=nothing", func(pageRow) bool { return false }},
	} {
		query, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		// One page holds everything: the rows the filter selects, in
		// (mirror, topic, partition) order.
		one := e.partitionsPage(t, withLimit(query, service.MaxPartitionPageLimit))
		if one.next != "" || one.nextInBody {
			t.Fatalf("%s: one page of %d rows has a next_cursor", c.query, len(one.rows))
		}
		var want []pageRow
		for _, r := range all {
			if c.want(r) {
				want = append(want, r)
			}
		}
		if !slices.Equal(one.rows, want) {
			t.Fatalf("%s: rows %v, want %v", c.query, one.rows, want)
		}
		for _, limit := range []int{1, 2, 3, 5, len(one.rows), len(one.rows) + 1} {
			if limit < 1 {
				continue
			}
			if got := e.walk(t, query, limit, nil); !slices.Equal(got, one.rows) {
				t.Fatalf("%s, pages of %d: %v\nwant %v", c.query, limit, got, one.rows)
			}
		}
	}
}

func withLimit(q url.Values, limit int) url.Values {
	out := url.Values{"limit": {strconv.Itoa(limit)}}
	for k, v := range q {
		out[k] = v
	}
	return out
}

// TestListPartitionsDefaultPage: without a limit a page holds 1,000 rows.
func TestListPartitionsDefaultPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "big")
	for _, sql := range []string{
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('big', 'wide', 'mirroring')`,
		`INSERT INTO mirror_partitions (mirror, topic, partition) SELECT 'big', 'wide', p FROM generate_series(0, 1000) p`,
	} {
		if _, err := e.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	first := e.partitionsPage(t, url.Values{"mirror": {"big"}})
	if len(first.rows) != service.DefaultPartitionPageLimit || first.next == "" {
		t.Fatalf("first page: %d rows, next_cursor %q; want %d and a cursor", len(first.rows), first.next, service.DefaultPartitionPageLimit)
	}
	last := e.partitionsPage(t, url.Values{"mirror": {"big"}, "cursor": {first.next}})
	if len(last.rows) != 1 || last.rows[0].partition != 1000 || last.next != "" {
		t.Fatalf("second page: %v, next_cursor %q; want wide/1000 alone", last.rows, last.next)
	}
}

// TestListPartitionsPageErrors: a limit out of 1..5000 or not an integer,
// and a cursor that is not one the server made, are 400s that name the
// field, with any other bad field, and change nothing.
func TestListPartitionsPageErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pagesDataset(t, e)
	before := e.snapshot(t)
	b64 := base64.RawURLEncoding.EncodeToString
	for _, c := range []struct {
		query  string
		fields []string
	}{
		{"limit=0", []string{"limit"}},
		{"limit=-1", []string{"limit"}},
		{"limit=5001", []string{"limit"}},
		{"limit=99999999999999999999", []string{"limit"}},
		{"limit=abc", []string{"limit"}},
		{"limit=1.5", []string{"limit"}},
		{"limit=%201", []string{"limit"}},
		{"cursor=!!", []string{"cursor"}},
		{"cursor=" + b64([]byte("not json")), []string{"cursor"}},
		{"cursor=" + b64([]byte(`{"m":"a","t":"orders"}`)) + "=", []string{"cursor"}}, // padded
		{"cursor=" + b64([]byte(`{"m":"a"}`)), []string{"cursor"}},
		{"cursor=" + b64([]byte(`{"m":"a","t":"orders","p":-1}`)), []string{"cursor"}},
		{"cursor=" + b64([]byte(`{"m":"a","t":"orders","p":1.5}`)), []string{"cursor"}},
		{"cursor=" + b64([]byte(`["a","orders",1]`)), []string{"cursor"}},
		{"limit=0&cursor=x&state=BOGUS", []string{"state", "limit", "cursor"}},
	} {
		p := wantProblem(t, e.do(t, "GET", "/v1/partitions?"+c.query, nil), http.StatusBadRequest, "validation", c.fields...)
		var got []string
		for _, f := range p.Errors {
			got = append(got, f.Field)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.fields))
		if !slices.Equal(got, want) {
			t.Errorf("%s: fields %v, want %v", c.query, got, want)
		}
		if slices.Contains(c.fields, "limit") && !strings.Contains(p.Detail, "from 1 to 5000") {
			t.Errorf("%s: detail %q does not give the range", c.query, p.Detail)
		}
	}
	// An empty limit is no limit, and a cursor may name a key that no
	// longer exists (or never did): the page starts after it.
	ok(t, e.do(t, "GET", "/v1/partitions?limit=", nil), http.StatusOK, nil)
	p := e.partitionsPage(t, url.Values{"cursor": {b64([]byte(`{"m":"a","t":"orders.v1","p":99}`))}, "mirror": {"a"}})
	if len(p.rows) == 0 || p.rows[0].String() != "a/orders.v2/0" {
		t.Fatalf("page after a/orders.v1/99: %v; want it to start at a/orders.v2/0", p.rows)
	}
	e.unchanged(t, before)
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestListPartitionsCursorSurvivesChanges: the cursor is a key, not an
// offset. Rows inserted or deleted between pages, the row the cursor names
// included, neither repeat nor skip a row that exists throughout; a row
// added ahead of the cursor is returned, one added behind it is not.
func TestListPartitionsCursorSurvivesChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	all := pagesDataset(t, e)
	e.exec(t, `INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('a', 'alpha', 'mirroring')`)
	del := func(r pageRow) {
		t.Helper()
		e.exec(t, `DELETE FROM mirror_partitions WHERE mirror = $1 AND topic = $2 AND partition = $3`,
			r.mirror, r.topic, r.partition)
	}
	key := func(mirror, topic string, partition int32) pageRow {
		return pageRow{mirror: mirror, topic: topic, partition: partition, state: "UNKNOWN"}
	}
	pages := 0
	got := e.walk(t, url.Values{}, 4, func(n int, last pageRow) {
		pages++
		switch n {
		case 0: // the page ended at a/orders/3
			if last.String() != "a/orders/3" {
				t.Fatalf("first page ends at %s", last)
			}
			del(last)                                      // the row the cursor names
			del(key("a", "orders", 0))                     // behind the cursor, already returned
			del(key("b", "orders-eu", 5))                  // ahead: never returned
			e.insertPartition(t, key("a", "alpha", 0))     // behind: not returned
			e.insertPartition(t, key("b", "orders-eu", 6)) // ahead: returned
		case 1: // a/orders/4, 5, 6 and a/orders.v2/0
			if last.String() != "a/orders.v2/0" {
				t.Fatalf("second page ends at %s", last)
			}
			del(last)
			e.insertPartition(t, key("a", "orders", 7)) // now behind
		}
	})
	if pages < 3 {
		t.Fatalf("walked %d pages; the test needs at least 3", pages+1)
	}
	var want []pageRow
	for _, r := range all {
		if r.String() != "b/orders-eu/5" {
			want = append(want, r)
		}
	}
	want = append(want, key("b", "orders-eu", 6))
	if !slices.Equal(got, want) {
		t.Fatalf("walk across changes:\n%v\nwant\n%v", got, want)
	}
}
