package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"kmirror/api"
)

// TestListPartitionsAttentionFilters: erroring=true keeps the partitions
// with an error (FAILED, or retrying in their state), the ones the mirror
// status counts as erroring; divergent_tail=true keeps those that kept a
// divergent tail. They combine with the other filters and with each other,
// page like any filter, false is no filter, and a value that is not a
// boolean is refused with the field's name. The console's mirror page
// reads its attention lists with them, a bounded page at a time, instead
// of every partition of the mirror.
func TestListPartitionsAttentionFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "a")
	e.createMirror(t, "b")
	for _, sql := range []string{
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES
			('a', 'orders', 'mirroring'), ('a', 'payments', 'mirroring'), ('b', 'orders-eu', 'mirroring')`,
		// Partition p of each topic: p%4 = 1 FAILED with an error, 2
		// MIRRORING retrying with an error, 3 MIRRORING with a kept tail,
		// 0 MIRRORING with an empty error (no error).
		`INSERT INTO mirror_partitions (mirror, topic, partition, state, error,
				divergent_tail_start, divergent_tail_end, divergent_tail_records)
			SELECT t.mirror, t.topic, p,
				CASE WHEN p % 4 = 1 THEN 'FAILED' ELSE 'MIRRORING' END,
				CASE p % 4 WHEN 1 THEN 'divergence' WHEN 2 THEN 'source unreachable' WHEN 0 THEN '' END,
				CASE WHEN p % 4 = 3 THEN 20 END, CASE WHEN p % 4 = 3 THEN 23 END, CASE WHEN p % 4 = 3 THEN 3 END
			FROM mirror_topics t, generate_series(0, 9) p`,
		// One FAILED partition both errors and keeps a tail.
		`UPDATE mirror_partitions SET error = 'divergence', state = 'FAILED'
			WHERE mirror = 'a' AND topic = 'payments' AND partition = 7`,
	} {
		if _, err := e.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(topic string, ps ...int32) []pageRow {
		out := make([]pageRow, len(ps))
		for i, p := range ps {
			state := "MIRRORING"
			if p%4 == 1 || (topic == "payments" && p == 7) {
				state = "FAILED"
			}
			out[i] = pageRow{"a", topic, p, state}
		}
		return out
	}
	for _, c := range []struct {
		query string
		want  []pageRow
	}{
		{"mirror=a&erroring=true", append(rows("orders", 1, 2, 5, 6, 9), rows("payments", 1, 2, 5, 6, 7, 9)...)},
		{"mirror=a&divergent_tail=true", append(rows("orders", 3, 7), rows("payments", 3, 7)...)},
		{"mirror=a&erroring=true&divergent_tail=true", rows("payments", 7)},
		{"mirror=a&erroring=true&state=FAILED", append(rows("orders", 1, 5, 9), rows("payments", 1, 5, 7, 9)...)},
		{"mirror=a&topic=orders&erroring=1", rows("orders", 1, 2, 5, 6, 9)},
		{"mirror=a&topic=orders&divergent_tail=true&erroring=false", rows("orders", 3, 7)},
	} {
		query, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.partitionsPage(t, query).rows; !slices.Equal(got, c.want) {
			t.Errorf("%s: rows %v, want %v", c.query, got, c.want)
		}
		if got := e.walk(t, query, 2, nil); !slices.Equal(got, c.want) {
			t.Errorf("%s, pages of 2: %v, want %v", c.query, got, c.want)
		}
	}

	// The filter selects what the mirror status counts.
	var m api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/a", nil), http.StatusOK, &m)
	if got := len(e.walk(t, url.Values{"mirror": {"a"}, "erroring": {"true"}}, 1000, nil)); m.Status.Erroring != got {
		t.Errorf("the mirror status counts %d erroring, the filter selects %d", m.Status.Erroring, got)
	}

	r := e.do(t, "GET", "/v1/partitions?mirror=a&erroring=yes&divergent_tail=2", nil)
	p := wantProblem(t, r, http.StatusBadRequest, "validation", "erroring", "divergent_tail")
	var fields []string
	for _, f := range p.Errors {
		fields = append(fields, f.Field)
	}
	if !slices.Equal(fields, []string{"erroring", "divergent_tail"}) {
		t.Errorf("a bad erroring and divergent_tail: fields %v, want both; response %s", fields, r)
	}
}
