package workers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devcluster"
	"kmirror/repo"
	"kmirror/service"
)

// TestScenarioRetentionLoss: retention removes source records that were
// never mirrored (here: while paused). On resume the partition continues
// from the source's log start, counts the lost records, and keeps
// mirroring.
func TestScenarioRetentionLoss(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	srcConn, dstConn := plain(env.clusters.SourceAddr()), plain(env.clusters.DestinationAddr())
	produceRecords(t, srcConn, seq("orders", 0, "a", 20)...)
	env.createMirror("m", "orders")
	env.startInstance("i1")
	env.waitStates("m", service.StateMirroring, 20*time.Second)
	waitEndsEqual(t, env, "orders", 1, 20*time.Second)
	ctx := context.Background()
	if _, err := env.svc.PauseTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.waitStates("m", service.StatePaused, 10*time.Second)
	if row := env.partition("m", "orders", 0); row.SrcNext == nil || *row.SrcNext != 20 {
		t.Fatalf("checkpoint before retention: %s", describePartition(row))
	}
	produceRecords(t, srcConn, seq("orders", 0, "b", 20)...) // offsets 20-39
	// Retention: everything before 30 goes, 10 of them never mirrored.
	if err := env.clusters.Source.DeleteRecords("orders", 0, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := env.svc.ResumeTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	row := env.waitPartition("m", "orders", 0, 20*time.Second, "MIRRORING with lost records counted", func(r repo.Partition) bool {
		return r.State == string(service.StateMirroring) && r.LostRecords > 0
	})
	if row.LostRecords != 10 {
		t.Fatalf("lost_records = %d, want 10", row.LostRecords)
	}
	produceRecords(t, srcConn, seq("orders", 0, "c", 5)...) // offsets 40-44
	waitFor(t, 20*time.Second, "destination to hold 20 + 10 + 5 records", func() (bool, string) {
		e := endOffsets(t, dstConn, "orders")[0]
		return e == 35, fmt.Sprint(e)
	})
	dst := readAll(t, env.clusters.DestinationAddr(), "orders", 0, false)
	src := readAll(t, env.clusters.SourceAddr(), "orders", 0, true) // from the log start, 30
	if len(dst) != 35 || len(src) != 15 || src[0].Offset != 30 {
		t.Fatalf("destination %d records, source %d from %d", len(dst), len(src), src[0].Offset)
	}
	for i, r := range dst {
		var want string
		switch {
		case i < 20:
			want = fmt.Sprintf("a-%d", i)
		default:
			want = string(src[i-20].Value)
			if err := sameRecord(src[i-20], r); err != nil {
				t.Fatalf("destination %d vs source %d: %v", i, src[i-20].Offset, err)
			}
		}
		if string(r.Value) != want {
			t.Fatalf("destination offset %d = %q, want %q", i, r.Value, want)
		}
	}
	_, msgs := env.stateEvents("m", "orders", 0)
	if !strings.Contains(strings.Join(msgs, "\n"), "removed by retention") {
		t.Fatalf("no event surfaces the loss: %q", msgs)
	}
}

// TestScenarioDestinationTopicDeleted: the destination topic is deleted
// under a mirroring partition; it is recreated and re-mirrored from the
// source, which still has every record. Then it is deleted and recreated
// empty by someone else before kmirror notices, with the same outcome.
func TestScenarioDestinationTopicDeleted(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 10)

	if err := env.clusters.Destination.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	// New source records make the worker produce into the missing topic.
	produce(t, env.clusters.SourceAddr(), "orders", 2, 5, kgo.NoCompression())
	waitEndsEqual(t, env, "orders", 2, 30*time.Second)
	env.waitStates("m", service.StateMirroring, 10*time.Second)
	produce(t, env.clusters.SourceAddr(), "orders", 2, 5, kgo.NoCompression())
	waitEndsEqual(t, env, "orders", 2, 20*time.Second)

	// Someone else deletes and recreates it at once: the producer still
	// holds the old topic ID, which kgo never replaces by itself.
	if err := env.clusters.Destination.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	if err := env.clusters.Destination.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, env.clusters.SourceAddr(), "orders", 2, 5, kgo.NoCompression())
	waitEndsEqual(t, env, "orders", 2, 30*time.Second)
	env.waitStates("m", service.StateMirroring, 10*time.Second)
}

// TestScenarioSourceTopicRecreated: a source topic is deleted and created
// again, once with fewer records than were mirrored (its end is before the
// checkpoint) and once with more (the end check passes, but the record at
// the last mirrored offset is another one). Mirroring must not continue
// into the new topic's records: FAILED, not retried, saying why.
func TestScenarioSourceTopicRecreated(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	newRecords := map[string]int{"shorter": 5, "longer": 30}
	for topic := range newRecords {
		if err := env.clusters.Source.CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		produceRecords(t, plain(env.clusters.SourceAddr()), seq(topic, 0, "old", 20)...)
	}
	env.createMirror("m", "shorter|longer")
	env.startInstance("i1")
	env.waitStates("m", service.StateMirroring, 20*time.Second)
	for topic := range newRecords {
		waitEndsEqual(t, env, topic, 1, 20*time.Second)
	}

	for topic, n := range newRecords {
		if err := env.clusters.Source.DeleteTopic(topic); err != nil {
			t.Fatal(err)
		}
		if err := env.clusters.Source.CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		produceRecords(t, plain(env.clusters.SourceAddr()), seq(topic, 0, "new", n)...)
	}
	// kgo surfaces UNKNOWN_TOPIC_ID only after several fetch retries.
	for topic := range newRecords {
		row := env.waitPartition("m", topic, 0, 40*time.Second, "FAILED, not retryable", func(r repo.Partition) bool {
			return r.State == string(service.StateFailed) && !r.Retryable
		})
		if !strings.Contains(row.Error, "recreated") {
			t.Fatalf("%s: error does not say the source topic was recreated: %q", topic, row.Error)
		}
	}
	holdsFor(t, 500*time.Millisecond, "FAILED without retry", func() (bool, string) {
		for topic := range newRecords {
			if r := env.partition("m", topic, 0); r.State != string(service.StateFailed) || r.Retryable {
				return false, describePartition(r)
			}
		}
		return true, ""
	})
	// Nothing of the new topics reached the destination.
	for topic := range newRecords {
		dst := readAll(t, env.clusters.DestinationAddr(), topic, 0, false)
		if len(dst) != 20 {
			t.Fatalf("%s: destination has %d records, want the 20 old ones", topic, len(dst))
		}
		for _, r := range dst {
			if strings.HasPrefix(string(r.Value), "new") {
				t.Fatalf("%s: a record of the recreated source topic was mirrored: %q at %d", topic, r.Value, r.Offset)
			}
		}
	}
}

// TestScenarioForeignWrite: with no authorizer on the destination, an
// application writes into a mirrored partition. The next mirrored record
// lands at the wrong offset; that is detected and the partition ends
// FAILED (divergence, not retried) instead of the foreign record being
// silently skipped or the mirror carrying on shifted.
func TestScenarioForeignWrite(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	srcConn, dstConn := plain(env.clusters.SourceAddr()), plain(env.clusters.DestinationAddr())
	produceRecords(t, srcConn, seq("orders", 0, "src", 10)...)
	env.createMirror("m", "orders")
	env.startInstance("i1")
	env.waitStates("m", service.StateMirroring, 20*time.Second)
	waitEndsEqual(t, env, "orders", 1, 20*time.Second)

	produceRecords(t, dstConn, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("foreign")})
	produceRecords(t, srcConn, seq("orders", 0, "more", 3)...)
	row := env.waitPartition("m", "orders", 0, 20*time.Second, "FAILED, not retryable", func(r repo.Partition) bool {
		return r.State == string(service.StateFailed) && !r.Retryable
	})
	if !strings.Contains(row.Error, "divergence") {
		t.Fatalf("error does not report the divergence: %q", row.Error)
	}
	_, msgs := env.stateEvents("m", "orders", 0)
	if !strings.Contains(strings.Join(msgs, "\n"), "foreign write detected") {
		t.Fatalf("no event reports the foreign write: %q", msgs)
	}
	// The foreign record is still where it landed, and the checkpoint did
	// not move past it.
	dst := readAll(t, env.clusters.DestinationAddr(), "orders", 0, false)
	if len(dst) < 11 || string(dst[10].Value) != "foreign" {
		t.Fatalf("destination offset 10 is not the foreign record (%d records)", len(dst))
	}
	if row.SrcNext == nil || *row.SrcNext != 10 || *row.DstNext != 10 {
		t.Fatalf("checkpoint moved past the foreign write: %s", describePartition(row))
	}
}
