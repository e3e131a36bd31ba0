package migrations_test

import (
	"context"
	"testing"
)

// TestEventIncarnationMigration: 000013 gives each existing mirror an
// incarnation and its events from its creation on; events of a deleted
// namesake (before the mirror's creation) stay without one. Afterwards the
// trigger fills in events that do not say theirs, a delete event (written
// once the row is gone) included; down and up again work.
func TestEventIncarnationMigration(t *testing.T) {
	t.Parallel()
	m, pool := migratedTo(t, 12)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// An earlier x, deleted, then the current x created (each in its own
	// transaction, as the service writes them).
	exec(`INSERT INTO events (at, kind, mirror, message) VALUES (now() - interval '1 hour', 'mirror.created', 'x', 'old')`)
	exec(`INSERT INTO events (at, kind, mirror, message) VALUES (now() - interval '50 minutes', 'mirror.deleted', 'x', 'old')`)
	exec(`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('x', 'h:9092')`)
	exec(`INSERT INTO events (kind, mirror, message) VALUES ('mirror.created', 'x', 'new')`)
	exec(`INSERT INTO events (kind, message) VALUES ('state.restored', 'no mirror')`)
	if err := m.Migrate(13); err != nil {
		t.Fatal(err)
	}
	var inc int64
	if err := pool.QueryRow(ctx, `SELECT incarnation FROM mirrors WHERE name = 'x'`).Scan(&inc); err != nil {
		t.Fatal(err)
	}
	incarnations := func() map[string]*int64 {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT coalesce(mirror, '') || ':' || kind || ':' || message, mirror_incarnation FROM events`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]*int64{}
		for rows.Next() {
			var k string
			var v *int64
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		return out
	}
	check := func(key string, want *int64) {
		t.Helper()
		got, ok := incarnations()[key]
		switch {
		case !ok:
			t.Fatalf("no event %s", key)
		case (got == nil) != (want == nil) || (got != nil && *got != *want):
			t.Fatalf("event %s: incarnation %v, want %v", key, deref(got), deref(want))
		}
	}
	check("x:mirror.created:old", nil)
	check("x:mirror.deleted:old", nil)
	check("x:mirror.created:new", &inc)
	check(":state.restored:no mirror", nil)

	// The trigger: an event that does not say its incarnation gets the
	// mirror's, and a delete event, written after the row is gone, the
	// one of the mirror's latest event.
	exec(`INSERT INTO events (kind, mirror, message) VALUES ('mirror.updated', 'x', 'new')`)
	check("x:mirror.updated:new", &inc)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM mirrors WHERE name = 'x'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (kind, mirror, message) VALUES ('mirror.deleted', 'x', 'new')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	check("x:mirror.deleted:new", &inc)
	exec(`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('x', 'h:9092')`)
	exec(`INSERT INTO events (kind, mirror, message) VALUES ('mirror.created', 'x', 'newer')`)
	var newer int64
	if err := pool.QueryRow(ctx, `SELECT incarnation FROM mirrors WHERE name = 'x'`).Scan(&newer); err != nil {
		t.Fatal(err)
	}
	if newer <= inc {
		t.Fatalf("incarnation %d after %d, want a greater one", newer, inc)
	}
	check("x:mirror.created:newer", &newer)
	// An incarnation given is kept.
	exec(`INSERT INTO events (kind, mirror, message, mirror_incarnation) VALUES ('mirror.updated', 'x', 'given', $1)`, inc)
	check("x:mirror.updated:given", &inc)

	if err := m.Migrate(12); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(13); err != nil {
		t.Fatal(err)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
