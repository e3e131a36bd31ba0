package repo_test

import (
	"context"
	"errors"
	"testing"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// TestReadOnlyDatabaseIsUnavailable: a database that refuses writes (a
// standby, or a primary being demoted in a failover) is unavailable, as an
// outage is, not a bug: the write fails with ErrUnavailable, so the API
// answers 503 and workers retry.
func TestReadOnlyDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	pool, err := repo.Open(ctx, url+"&default_transaction_read_only=on")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = repo.InstancesRegister(ctx, pool, "i1", "host", "v", true)
	if !errors.Is(err, repo.ErrUnavailable) {
		t.Fatalf("a write to a read-only database: %v, want ErrUnavailable", err)
	}
}
