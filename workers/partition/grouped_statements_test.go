package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/testing/testdb"
	"kmirror/internal/testing/testnet"
	"kmirror/repo"
	"kmirror/service"
)

// stateWritesWorld is a topic of n partitions, each leased by "i1" at epoch
// 1 and UNKNOWN, and the group writer over it.
func stateWritesWorld(t *testing.T, n int) (*pgxpool.Pool, *grouped[service.PartitionTransition, repo.Partition]) {
	t.Helper()
	pool := testdb.Pool(t)
	for _, sql := range []string{
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`,
		`INSERT INTO mirror_topics (mirror, topic, desired_state) VALUES ('m', 't', 'mirroring')`,
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('i1', 1, now() + interval '1 hour')`,
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, lease_owner, lease_epoch, lease_session)
			SELECT 'm', 't', g, 'i1', 1, 1 FROM generate_series(0, %d) AS g`, n-1),
	} {
		if _, err := pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := service.NewWorkers(service.WorkersConfig{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return pool, newStateWrites(svc, stateWriteTimeout, slog.New(slog.DiscardHandler))
}

func toPreparing(p int32) service.PartitionTransition {
	return service.PartitionTransition{Mirror: "m", Topic: "t", Partition: p, Owner: "i1", Epoch: 1,
		From: service.StateUnknown, To: service.StatePreparing, Retryable: true}
}

// writeWhileHeld holds partition 0's row locked, so that its change's
// statement waits; writes the others' changes, which queue behind it; and
// lets it go once all of them are asked for. It returns each change's error.
func writeWhileHeld(t *testing.T, pool *pgxpool.Pool, s *grouped[service.PartitionTransition, repo.Partition], ts []service.PartitionTransition) []error {
	t.Helper()
	ctx := t.Context()
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.WithoutCancel(ctx))
	if _, err := lock.Exec(ctx, `SELECT 1 FROM mirror_partitions WHERE partition = 0 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, tr := range ts {
		wg.Go(func() { _, errs[i] = s.do(tr) })
		if i == 0 { // the first change's statement is the one that waits
			waitFor(t, "the first statement waiting on the lock", func() (bool, string) {
				var n int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'
					  AND query LIKE '%UPDATE mirror_partitions%'`).Scan(&n)
				return err == nil && n == 1, fmt.Sprint(n, " waiting ", err)
			})
		}
	}
	waitFor(t, "every change queued", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue) == len(ts)-1, fmt.Sprint(len(s.queue), " queued")
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return errs
}

// statements counts the statements that wrote the topic's changes: the
// rows of one share their transaction's now().
func statements(t *testing.T, pool *pgxpool.Pool) (changed, statements int) {
	t.Helper()
	err := pool.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT state_changed_at) FROM mirror_partitions
		WHERE state IS NOT NULL`).Scan(&changed, &statements)
	if err != nil {
		t.Fatal(err)
	}
	return changed, statements
}

// TestStateWritesGroupChangesAskedForTogether: changes asked for while a
// statement runs are written together by the next one.
func TestStateWritesGroupChangesAskedForTogether(t *testing.T) {
	t.Parallel()
	const n = 20
	pool, s := stateWritesWorld(t, n)
	ts := make([]service.PartitionTransition, n)
	for i := range ts {
		ts[i] = toPreparing(int32(i))
	}
	for i, err := range writeWhileHeld(t, pool, s, ts) {
		if err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	if changed, stmts := statements(t, pool); changed != n || stmts != 2 {
		t.Fatalf("%d changes written by %d statements; want %d by 2", changed, stmts, n)
	}
	// The writer stops when idle, and a change alone is written at once.
	waitFor(t, "the writer idle", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.running, "running"
	})
	tr := toPreparing(0)
	tr.From, tr.To = service.StatePreparing, service.StateMirroring
	if row, err := s.do(tr); err != nil || row.State != service.StateMirroring {
		t.Fatalf("a change alone: %+v, %v", row, err)
	}
}

// TestStateWritesRefusedGroupFailsOnlyItsBadChange: a group that Postgres
// refuses because of one change is written again change by change, so the
// others land and only that one fails; a lost lease fails alone as well.
func TestStateWritesRefusedGroupFailsOnlyItsBadChange(t *testing.T) {
	t.Parallel()
	pool, s := stateWritesWorld(t, 4)
	ts := []service.PartitionTransition{toPreparing(0), toPreparing(1), toPreparing(2), toPreparing(3)}
	ts[2].Reason = "bad \x00 byte"
	ts[3].Epoch = 7
	errs := writeWhileHeld(t, pool, s, ts)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("good changes: %v, %v", errs[0], errs[1])
	}
	if !errors.Is(errs[2], repo.ErrInvalidText) {
		t.Fatalf("the change Postgres cannot store: %v, want ErrInvalidText", errs[2])
	}
	if !errors.Is(errs[3], service.ErrLeaseLost) {
		t.Fatalf("the change at a stale epoch: %v, want ErrLeaseLost", errs[3])
	}
	if changed, _ := statements(t, pool); changed != 2 {
		t.Fatalf("%d changes written; want 2", changed)
	}
}

// TestRowReadsFindEachRow: a group of reads returns each caller its own
// row, and ErrNotFound to one that names no row.
func TestRowReadsFindEachRow(t *testing.T) {
	t.Parallel()
	pool, _ := stateWritesWorld(t, 3)
	reads := newRowReads(pool, slog.New(slog.DiscardHandler))
	ids := []repo.PartitionID{{Mirror: "m", Topic: "t", Partition: 2}, {Mirror: "m", Topic: "t", Partition: 7},
		{Mirror: "m", Topic: "t", Partition: 0}}
	rows := make([]repo.Partition, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { rows[i], errs[i] = reads.do(id) })
	}
	wg.Wait()
	if errs[0] != nil || rows[0].Partition != 2 || rows[0].LeaseOwner != "i1" {
		t.Errorf("partition 2: %+v, %v", rows[0], errs[0])
	}
	if !errors.Is(errs[1], repo.ErrNotFound) {
		t.Errorf("partition 7, which does not exist: %+v, %v; want ErrNotFound", rows[1], errs[1])
	}
	if errs[2] != nil || rows[2].Partition != 0 {
		t.Errorf("partition 0: %+v, %v", rows[2], errs[2])
	}
}

// TestGroupedPanicFailsOnlyItsGroup: a panic while serving a group is that
// group's callers' error, and the next group is served.
func TestGroupedPanicFailsOnlyItsGroup(t *testing.T) {
	g := newGrouped("test", 10, 0, slog.New(slog.DiscardHandler), func(reqs []int) ([]int, []error) {
		if reqs[0] < 0 {
			panic("negative")
		}
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = 2 * r
		}
		return out, make([]error, len(reqs))
	})
	if _, err := g.do(-1); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("the panicking group: %v", err)
	}
	if v, err := g.do(21); err != nil || v != 42 {
		t.Fatalf("the next group: %d, %v", v, err)
	}
}

// TestStateWritesOutageFailsEachChangeOnce: when the database does not
// answer, a group's changes all fail with ErrUnavailable after one
// attempt: they are not tried again one by one, which would make each wait
// for the same outage. The "database" accepts connections and never
// answers, so every attempt is one connection that times out.
func TestStateWritesOutageFailsEachChangeOnce(t *testing.T) {
	t.Parallel()
	db := testnet.NewBlackhole(t)
	pool, err := pgxpool.New(t.Context(), "postgres://kmirror@"+db.Addr()+"/none?sslmode=disable") // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc, err := service.NewWorkers(service.WorkersConfig{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	s := newStateWrites(svc, time.Second, slog.New(slog.DiscardHandler))
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = s.do(toPreparing(0)) })
	waitFor(t, "the first statement's connection", func() (bool, string) {
		return db.Accepted() == 1, fmt.Sprint(db.Accepted(), " accepted")
	})
	for i := 1; i < 3; i++ {
		wg.Go(func() { _, errs[i] = s.do(toPreparing(int32(i))) })
	}
	waitFor(t, "the other two changes queued behind the first", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue) == 2, fmt.Sprint(len(s.queue), " queued")
	})
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, repo.ErrUnavailable) {
			t.Errorf("change %d: %v, want ErrUnavailable", i, err)
		}
	}
	// The first change alone, then the other two together: two attempts.
	if n := db.Accepted(); n != 2 {
		t.Errorf("%d connection attempts for three changes in two groups, want 2", n)
	}
}

// TestGroupedLingerGathersABurst: a request made while the first of a burst
// lingers (a second here, far more than the test needs to make it) joins
// its group, so the first does not run alone. With no linger the first is
// served alone.
func TestGroupedLingerGathersABurst(t *testing.T) {
	for _, c := range []struct {
		linger time.Duration
		groups []int
	}{{time.Second, []int{2}}, {0, []int{1, 1}}} {
		var mu sync.Mutex
		var groups []int
		release := make(chan struct{})
		g := newGrouped("test", 10, c.linger, slog.New(slog.DiscardHandler), func(reqs []int) ([]int, []error) {
			mu.Lock()
			groups = append(groups, len(reqs))
			mu.Unlock()
			<-release
			return reqs, make([]error, len(reqs))
		})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.do(1) })
		if c.linger == 0 {
			waitFor(t, "the first request served", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				return len(groups) == 1, fmt.Sprint(groups)
			})
		} else {
			waitFor(t, "the first request queued", func() (bool, string) {
				g.mu.Lock()
				defer g.mu.Unlock()
				return len(g.queue) == 1, fmt.Sprint(len(g.queue), " queued")
			})
		}
		wg.Go(func() { _, _ = g.do(2) })
		waitFor(t, "the second request queued", func() (bool, string) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.queue) == 2 || len(groups) > 0 && len(g.queue) == 1, fmt.Sprint(len(g.queue), " queued")
		})
		close(release)
		wg.Wait()
		if fmt.Sprint(groups) != fmt.Sprint(c.groups) {
			t.Errorf("linger %v: groups %v, want %v", c.linger, groups, c.groups)
		}
	}
}
