package repo_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"kmirror/internal/vocabulary/states"
	"kmirror/repo"
)

// TestPartitionsTransitionsWritesEachFenceAlone: in one statement, a write
// whose fence holds lands with its event and outbox row, and one whose
// epoch, owner or From state moved on writes nothing, without holding the
// others back; results, events and outbox rows follow the order given.
func TestPartitionsTransitionsWritesEachFenceAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := fenceWorld(t) // 0: PREPARING, a@2; 1: MIRRORING, b@5
	src, dst := int64(40), int64(41)
	write := func(p int32, owner string, epoch int64, from, to, msg string) repo.PartitionStateWrite {
		return repo.PartitionStateWrite{
			PartitionsSetStateParams: repo.PartitionsSetStateParams{Mirror: "m", Topic: "t", Partition: p,
				Owner: owner, Epoch: epoch, From: states.Partition(from), To: states.Partition(to), Retryable: true},
			Event: repo.Event{Kind: "partition.state", Message: msg, Data: []byte(`{"n":1}`)}, OutboxKey: "key/" + msg}
	}
	ws := []repo.PartitionStateWrite{
		write(1, "b", 5, "MIRRORING", "PAUSING", "second-first"),
		write(0, "a", 1, "PREPARING", "MIRRORING", "stale-epoch"),
		write(0, "a", 2, "PREPARING", "MIRRORING", "lands"),
		write(1, "z", 5, "MIRRORING", "STOPPING", "other-owner"),
	}
	ws[2].SrcNext, ws[2].DstNext = &src, &dst
	got, err := repo.PartitionsTransitions(ctx, pool, ws, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ws) {
		t.Fatalf("%d results for %d writes", len(got), len(ws))
	}
	if got[0].Partition != 1 || got[0].State != "PAUSING" || got[0].PreviousState != "MIRRORING" {
		t.Fatalf("first write: %+v", got[0])
	}
	if got[1].Mirror != "" || got[3].Mirror != "" {
		t.Fatalf("fenced-out writes returned rows: %+v, %+v", got[1], got[3])
	}
	if got[2].State != "MIRRORING" || *got[2].SrcNext != 40 || *got[2].DstNext != 41 {
		t.Fatalf("third write: %+v", got[2])
	}
	rows, err := pool.Query(ctx, `SELECT e.message, o.key, o.value->>'state' FROM events e
		JOIN outbox o ON o.key = 'key/' || e.message ORDER BY e.id`)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for rows.Next() {
		var msg, key, state string
		if err := rows.Scan(&msg, &key, &state); err != nil {
			t.Fatal(err)
		}
		order = append(order, msg+":"+state)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"second-first:PAUSING", "lands:MIRRORING"}; !slices.Equal(order, want) {
		t.Fatalf("events and outbox rows %v, want %v", order, want)
	}
	// The single write is the same statement: a refused one is ErrNotFound.
	if _, err := repo.PartitionsTransition(ctx, pool, ws[1].PartitionsSetStateParams, ws[1].Event, ws[1].OutboxKey, 1); !errors.Is(err, repo.ErrNotFound) {
		t.Fatalf("single stale write: %v, want ErrNotFound", err)
	}
}
