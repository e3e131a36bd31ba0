package testdb

import (
	"strings"
	"testing"
	"time"
)

// ReadStats sees a write made on its own pool once the writer's counts are
// flushed, and Rates turns two snapshots into per-second figures; with
// pg_stat_statements loaded it counts the statement too.
func TestStats(t *testing.T) {
	ctx := t.Context()
	pool := Pool(t)
	statements, err := EnableStatements(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	before, err := ReadStats(ctx, pool, statements)
	if err != nil {
		t.Fatal(err)
	}
	// One connection, so the flush in ReadStats covers the insert.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO mirrors (name, bootstrap_servers) VALUES ('stats', 'localhost:9092')`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	time.Sleep(10 * time.Millisecond) // a measurable window
	after, err := ReadStats(ctx, pool, statements)
	if err != nil {
		t.Fatal(err)
	}
	r := after.Rates(before)
	if r.Seconds <= 0 || r.Commits <= 0 {
		t.Errorf("rates %+v: want a window and commits", r)
	}
	if r.Tables["mirrors"] <= 0 {
		t.Errorf("rows written by table %v (%s): want mirrors", r.Tables, r.TableSummary())
	}
	if !statements {
		t.Log("pg_stat_statements not loaded on this server: statements not checked")
		return
	}
	found := false
	for q, st := range r.Statements {
		if st.Calls > 0 && strings.HasPrefix(q, "INSERT INTO mirrors") {
			found = true
		}
		if isStatsQuery(q) {
			t.Errorf("ReadStats's own statement %q counted", q)
		}
	}
	if !found {
		t.Errorf("the insert is not among the statements:\n%s", r.TopStatements(20))
	}
}
