package repo_test

import (
	"context"
	"fmt"
	"testing"

	"kmirror/internal/testing/testdb"
	"kmirror/repo"
)

// BenchmarkBulkPartitionWrites: the instance's two bulk writes of
// mirror_partitions, end offsets (every 2 s) and checkpoints (every
// second), at 10,000 held partitions all of whose values change, as under
// traffic on every partition. Each op writes all of them once.
//
//	go test ./repo -run '^$' -bench BulkPartitionWrites -benchtime=5x
func BenchmarkBulkPartitionWrites(b *testing.B) {
	const topics, perTopic = 100, 100
	ctx := context.Background()
	pool := testdb.Pool(b)
	for _, sql := range []string{
		`INSERT INTO instances (id, session_epoch, session_expires_at) VALUES ('a', 1, now() + interval '1 hour')`,
		`INSERT INTO mirrors (name, bootstrap_servers) VALUES ('m', 'h:1')`,
		fmt.Sprintf(`INSERT INTO mirror_topics (mirror, topic, desired_state) SELECT 'm', 't' || g, 'mirroring' FROM generate_series(0, %d) g`, topics-1),
		fmt.Sprintf(`INSERT INTO mirror_partitions (mirror, topic, partition, state, lease_owner, lease_epoch, lease_session)
			SELECT 'm', 't' || g, p, 'MIRRORING', 'a', 1, 1 FROM generate_series(0, %d) g, generate_series(0, %d) p`, topics-1, perTopic-1),
		`ANALYZE mirror_partitions`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	var ids []repo.PartitionID
	for g := range topics {
		for p := range int32(perTopic) {
			ids = append(ids, repo.PartitionID{Mirror: "m", Topic: fmt.Sprint("t", g), Partition: p})
		}
	}
	// Every op writes new values: b.N restarts at each round.
	var n int64
	b.Run("ends", func(b *testing.B) {
		for range b.N {
			n++
			ends := make([]repo.EndOffsets, len(ids))
			for i, id := range ids {
				ends[i] = repo.EndOffsets{ID: id, Epoch: 1, SourceEnd: 100 + n, DestinationEnd: 100 + n}
			}
			stored, err := repo.PartitionsSetEnds(ctx, pool, "a", ends)
			if err != nil || len(stored) != len(ids) {
				b.Fatalf("stored %d of %d: %v", len(stored), len(ids), err)
			}
		}
	})
	b.Run("checkpoints", func(b *testing.B) {
		for range b.N {
			n++
			cps := make([]repo.Checkpoint, len(ids))
			for i, id := range ids {
				cps[i] = repo.Checkpoint{Mirror: id.Mirror, Topic: id.Topic, Partition: id.Partition, Epoch: 1,
					SrcNext: 100 + n, DstNext: 100 + n, SourceEnd: 200 + n, DestinationEnd: 100 + n}
			}
			saved, err := repo.CheckpointsSave(ctx, pool, "a", cps)
			if err != nil || len(saved) != len(ids) {
				b.Fatalf("saved %d of %d: %v", len(saved), len(ids), err)
			}
		}
	})
}
