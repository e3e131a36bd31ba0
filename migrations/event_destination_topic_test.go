package migrations_test

import (
	"context"
	"testing"
)

// TestEventDestinationTopicMigration: after 000024 an event that names a
// mirror's topic is stamped with the topic's destination name, read from
// its row; one without a topic, or whose topic has no row, is not, and a
// name given is kept. Events recorded before stay without one. Down and up
// again work.
func TestEventDestinationTopicMigration(t *testing.T) {
	t.Parallel()
	m, pool := migratedTo(t, 23)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('east', 'h:9092')`)
	exec(`INSERT INTO mirror_topics (mirror, topic, dest_topic, desired_state) VALUES ('east', 'orders', 'east.orders', 'mirroring')`)
	exec(`INSERT INTO events (kind, mirror, topic, message) VALUES ('partition.state', 'east', 'orders', 'before')`)
	if err := m.Migrate(24); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO events (kind, mirror, topic, partition, message) VALUES ('partition.state', 'east', 'orders', 0, 'after')`)
	exec(`INSERT INTO events (kind, mirror, message) VALUES ('topics.added', 'east', 'no topic')`)
	exec(`INSERT INTO events (kind, mirror, topic, message) VALUES ('partition.state', 'east', 'gone', 'no row')`)
	exec(`INSERT INTO events (kind, mirror, topic, message, destination_topic) VALUES ('partition.state', 'east', 'orders', 'given', 'x.orders')`)
	want := map[string]*string{"before": nil, "after": ptr("east.orders"), "no topic": nil, "no row": nil, "given": ptr("x.orders")}
	rows, err := pool.Query(ctx, `SELECT message, destination_topic FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var msg string
		var dest *string
		if err := rows.Scan(&msg, &dest); err != nil {
			t.Fatal(err)
		}
		if w, ok := want[msg]; !ok || (w == nil) != (dest == nil) || (w != nil && *w != *dest) {
			t.Errorf("event %q: destination_topic %v, want %v", msg, text(dest), text(w))
		}
		n++
	}
	if err := rows.Err(); err != nil || n != len(want) {
		t.Fatalf("%d events (%v), want %d", n, err, len(want))
	}

	if err := m.Migrate(23); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(24); err != nil {
		t.Fatal(err)
	}
}

func ptr(s string) *string { return &s }

func text(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
