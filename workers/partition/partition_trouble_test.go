package partition

import (
	"errors"
	"testing"
	"time"

	"kmirror/internal/kafka/leaders"
)

// TestPartitionTroubles: a partition's own fetch trouble shows once it has
// lasted, only for that partition, changes the watch's signature, and ends
// at its next delivery.
func TestPartitionTroubles(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tr := newPartitionTroubles()
	tr.now = func() time.Time { return now }
	p0 := troubleRef{mirror: "m", tp: leaders.TopicPartition{Topic: "t", Partition: 0}}
	p1 := troubleRef{mirror: "m", tp: leaders.TopicPartition{Topic: "t", Partition: 1}}
	tr.failed(p0, errors.New("batch at offset 7: bad"))
	if _, err := tr.trouble(p0, troubleAfter); err != nil || tr.signature(troubleAfter) != "" {
		t.Fatalf("trouble %v, signature %q before it lasted", err, tr.signature(troubleAfter))
	}
	now = now.Add(troubleAfter)
	tr.failed(p0, errors.New("batch at offset 7: still bad"))
	if since, err := tr.trouble(p0, troubleAfter); err == nil || err.Error() != "batch at offset 7: still bad" ||
		!since.Equal(time.Unix(1_000_000, 0)) {
		t.Fatalf("trouble %v since %v, want the latest error since the first", err, since)
	}
	if _, err := tr.trouble(p1, troubleAfter); err != nil {
		t.Fatalf("partition 1's trouble %v, want none", err)
	}
	if sig := tr.signature(troubleAfter); sig == "" {
		t.Fatal("no signature while partition 0 is in trouble")
	}
	tr.answered(p0)
	if _, err := tr.trouble(p0, troubleAfter); err != nil || tr.signature(troubleAfter) != "" {
		t.Fatalf("trouble %v after a delivery, want none", err)
	}
}
