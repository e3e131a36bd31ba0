package repo_test

import (
	"context"
	"testing"
	"time"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// An event that took the lower id but commits after its neighbour is read
// in its place, not skipped: a follower does not move past an id whose
// transaction still runs.
func TestEventsHorizonWaitsForAnEarlierIdStillCommitting(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	insert := func(q repo.DBTX, kind string) int64 {
		t.Helper()
		if err := repo.EventsInsert(ctx, q, repo.Event{Kind: kind, Message: kind}); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := q.QueryRow(ctx, `SELECT max(id) FROM events WHERE kind = $1`, kind).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var h repo.EventsHorizon
	var after int64
	follow := func() []string {
		t.Helper()
		through, err := h.Advance(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if through <= after {
			return nil
		}
		evs, err := repo.EventsList(ctx, pool, repo.EventsListParams{AfterID: after, Through: through})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
			after = e.ID
		}
		return kinds
	}
	if got := follow(); len(got) != 0 {
		t.Fatalf("events before any was written: %v", got)
	}

	slow, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	earlier := insert(slow, "test.slow")
	later := insert(pool, "test.quick")
	if later <= earlier {
		t.Fatalf("ids out of order: %d then %d", earlier, later)
	}
	for range 3 {
		if got := follow(); len(got) != 0 {
			t.Fatalf("read %v while the transaction holding id %d still runs", got, earlier)
		}
		time.Sleep(10 * time.Millisecond) // for Behind to grow
	}
	if h.Behind() < 20*time.Millisecond {
		t.Fatalf("held back for %s by an open transaction, want at least 20ms", h.Behind())
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Transactions in other tests' databases may hold the horizon for a
	// moment: transaction ids are the server's.
	got := followUntil(t, follow, 2)
	if len(got) != 2 || got[0] != "test.slow" || got[1] != "test.quick" {
		t.Fatalf("read %v, want [test.slow test.quick]", got)
	}

	// A rolled-back id leaves a gap that does not hold the horizon back.
	gone, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert(gone, "test.gone")
	if err := gone.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	insert(pool, "test.after-gap")
	got = followUntil(t, follow, 1)
	if len(got) != 1 || got[0] != "test.after-gap" {
		t.Fatalf("read %v after a rolled-back id, want [test.after-gap]", got)
	}
}

// followUntil follows until n events are read, for at most 10 s.
func followUntil(t *testing.T, follow func() []string, n int) []string {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(deadline); {
		got = append(got, follow()...)
		time.Sleep(5 * time.Millisecond)
	}
	return append(got, follow()...) // and nothing more
}
