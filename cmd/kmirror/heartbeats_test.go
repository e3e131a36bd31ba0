package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// `kmirror heartbeats rotate-key` adds a key that does not sign yet, keeps
// the one that signs, and later rotations delete what no one signs with.
func TestHeartbeatsRotateKey(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.New(t)
	pool, err := repo.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	before, err := repo.HeartbeatKeysList(ctx, pool)
	if err != nil || len(before) != 1 || !before[0].Signs || len(before[0].Key) != 32 {
		t.Fatalf("a new database's keys %+v (%v), want one that signs", before, err)
	}

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"heartbeats", "rotate-key", "--database-url", dbURL}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "Added heartbeat key") {
		t.Fatalf("rotate-key: %d %q %q", code, out.String(), errOut.String())
	}
	after, err := repo.HeartbeatKeysList(ctx, pool)
	if err != nil || len(after) != 2 || !after[0].Signs || after[1].Signs || bytes.Equal(after[0].Key, after[1].Key) {
		t.Fatalf("keys after a rotation %+v (%v), want the old one signing and a new one that does not sign yet", after, err)
	}

	// A minute and ten later (moved back in the database), the next
	// rotation deletes the first key: the second has signed for long enough.
	if _, err := pool.Exec(ctx, `UPDATE heartbeat_keys SET signs_from = signs_from - interval '11 minutes' WHERE id = $1`,
		after[1].ID); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KMIRROR_DATABASE_URL", "")
	if code := run(ctx, []string{"heartbeats", "rotate-key"}, &out, &errOut); code == 0 {
		t.Fatalf("rotate-key without a database: exit 0, want an error")
	}
	t.Setenv("KMIRROR_DATABASE_URL", dbURL)
	if code := run(ctx, []string{"heartbeats", "rotate-key"}, &out, &errOut); code != 0 {
		t.Fatalf("rotate-key: %d %q", code, errOut.String())
	}
	last, err := repo.HeartbeatKeysList(ctx, pool)
	ids := func(rows []repo.HeartbeatKeyRow) (ids []int64) {
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if err != nil || !slices.Equal(ids(last), []int64{after[1].ID, after[1].ID + 1}) || !last[0].Signs {
		t.Fatalf("keys after the third rotation %+v (%v), want the second (signing) and the third", last, err)
	}
}
