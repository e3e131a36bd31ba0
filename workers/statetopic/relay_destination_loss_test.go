package statetopic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestRelayRepublishesToARecreatedStateTopic: the destination goes away
// with a publish in flight and comes back empty. The relay recreates
// __mirror_state (compacted, with its configured partitions) and publishes
// the whole state again, records it had marked published included, so
// what restore reads equals the database; then it keeps publishing.
func TestRelayRepublishesToARecreatedStateTopic(t *testing.T) {
	t.Parallel()
	env, r, dest := publishedState(t)
	ctx := context.Background()

	// The destination dies while it holds a publish unanswered, so kgo
	// cannot know whether it was written. A change made during the
	// outage waits behind it. The destination comes back empty.
	holdPublishes(t, env, func() {
		if err := env.Workers.RecordSyncedACLs(ctx, "a", []repo.SyncedACL{readACL("User:carol")}); err != nil {
			t.Fatal(err)
		}
	})
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	saveCheckpoint(t, env, repo.PartitionID{Mirror: "b", Topic: "events", Partition: 0}, 9,
		repo.OffsetRun{SrcStart: 2, DstStart: 0, Count: 3}, repo.OffsetRun{SrcStart: 6, DstStart: 3, Count: 3})
	if err := env.Clusters.UpEmpty("destination"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitStateMatches(t, env, dest, "the whole state republished", 30*time.Second)
	t.Logf("__mirror_state recreated and whole again %s after the destination came back", time.Since(back).Round(time.Millisecond))
	if n := testutil.ToFloat64(r.recreated); n != 1 {
		t.Fatalf("recreated counted %v, want 1", n)
	}

	adm := adminOf(t, dest)
	topics, err := adm.ListTopics(ctx, service.StateTopic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(topics[service.StateTopic].Partitions); n != 5 {
		t.Fatalf("the recreated %s has %d partitions, want the configured 5", service.StateTopic, n)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, service.StateTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(service.StateTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	compact := false
	for _, c := range rc.Configs {
		compact = compact || c.Key == "cleanup.policy" && c.Value != nil && *c.Value == "compact"
	}
	if !compact {
		t.Fatalf("the recreated %s is not compacted: %+v", service.StateTopic, rc.Configs)
	}

	// The relay is not stuck: a change made now is published.
	if _, err := env.Svc.PauseTopics(ctx, "b", "events"); err != nil {
		t.Fatal(err)
	}
	waitStateMatches(t, env, dest, "a change after the return published", 20*time.Second)
}

// TestRelayNoticesStateTopicDeletedUnderAHungPublish: __mirror_state is
// deleted while the destination leaves a publish unanswered for good. The
// relay does not wait on it: it sees the topic missing, abandons its
// producer, recreates the topic and republishes the whole state.
func TestRelayNoticesStateTopicDeletedUnderAHungPublish(t *testing.T) {
	t.Parallel()
	env, r, dest := publishedState(t)
	ctx := context.Background()
	release := holdPublishes(t, env, func() {
		if _, err := env.Svc.PauseTopics(ctx, "a", "orders"); err != nil {
			t.Fatal(err)
		}
	})
	resp, err := adminOf(t, dest).DeleteTopic(ctx, service.StateTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	release() // the next publishes are answered; the held one never is
	deleted := time.Now()
	waitStateMatches(t, env, dest, "the whole state republished", 30*time.Second)
	t.Logf("__mirror_state recreated and whole again %s after it was deleted", time.Since(deleted).Round(time.Millisecond))
	if n := testutil.ToFloat64(r.recreated); n != 1 {
		t.Fatalf("recreated counted %v, want 1", n)
	}
}

// publishedState starts a relay, then gives the database two mirrors with
// topics, a synced-ACL set, checkpoints and offset maps (one of two
// chunks), and waits until __mirror_state holds all of it and the outbox
// is marked published.
func publishedState(t *testing.T) (*engineEnv, *Relay, kafkaconn.Config) {
	t.Helper()
	env := newEngineEnv(t, devcluster.Config{})
	ctx := context.Background()
	dest := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()}}
	for topic, n := range map[string]int32{"orders": 2, "events": 1} {
		if err := env.Clusters.Source.CreateTopic(topic, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The relay leads first, so __mirror_state is created while the
	// database is empty, as at a first start.
	r := env.startRelay()
	workertest.WaitFor(t, 20*time.Second, "__mirror_state created", func() (bool, string) {
		_, err := ReadState(ctx, dest)
		return err == nil, fmt.Sprint(err)
	})
	env.CreateMirror("a", "orders")
	env.CreateMirror("b", "events")
	if err := env.Workers.RecordSyncedACLs(ctx, "a", []repo.SyncedACL{readACL("User:alice"), readACL("User:bob")}); err != nil {
		t.Fatal(err)
	}
	w := service.OffsetMapChunkWidth
	saveCheckpoint(t, env, repo.PartitionID{Mirror: "a", Topic: "orders", Partition: 0}, w+8,
		repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 5}, repo.OffsetRun{SrcStart: w, DstStart: 5, Count: 8})
	saveCheckpoint(t, env, repo.PartitionID{Mirror: "a", Topic: "orders", Partition: 1}, 7,
		repo.OffsetRun{SrcStart: 0, DstStart: 0, Count: 7})
	saveCheckpoint(t, env, repo.PartitionID{Mirror: "b", Topic: "events", Partition: 0}, 3,
		repo.OffsetRun{SrcStart: 2, DstStart: 0, Count: 3})
	waitStateMatches(t, env, dest, "the state published", 20*time.Second)
	env.waitOutboxPublished()
	if n := testutil.ToFloat64(r.recreated); n != 0 {
		t.Fatalf("recreated counted %v before any loss", n)
	}
	return env, r, dest
}

func readACL(principal string) repo.SyncedACL {
	return repo.SyncedACL{ResourceType: "TOPIC", ResourceName: "orders", PatternType: "LITERAL",
		Principal: principal, Host: "*", Operation: "READ", Permission: "ALLOW"}
}

// holdPublishes makes the destination hold every produce request
// unanswered, runs change, and returns once the relay's publish of it is
// held. The held requests stay unanswered until the cluster closes;
// release lets the destination answer the ones that come after.
func holdPublishes(t *testing.T, env *engineEnv, change func()) (release func()) {
	t.Helper()
	dst := env.Clusters.Destination
	var holding atomic.Bool
	holding.Store(true)
	held, closed := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(closed) })
	dst.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !holding.Load() {
			dst.DropControl()
			return nil, nil, false
		}
		dst.KeepControl()
		select {
		case held <- struct{}{}:
		default:
		}
		dst.SleepControl(func() { <-closed }) // a closing cluster wakes it first
		return nil, errors.New("the destination died"), true
	})
	change()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the relay published nothing of the change")
	}
	return func() { holding.Store(false) }
}

// TestRelayStopIsBoundedWhileTheDestinationIsDown: a relay told to stop
// with a publish the destination will never answer gives up at its final
// deadline.
func TestRelayStopIsBoundedWhileTheDestinationIsDown(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	r := env.startRelay()
	env.CreateMirror("m", "orders")
	env.waitOutboxPublished()
	if err := env.Clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Svc.PauseTopics(context.Background(), "m", "orders"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r.Stop()
	if took := time.Since(start); took > finalTimeout+3*time.Second {
		t.Fatalf("the relay took %s to stop, want at most its final publish's %s and a little", took, finalTimeout)
	}
}

// saveCheckpoint writes what a partition worker would have saved: the
// checkpoint (src, its run's destination end) and the whole map.
func saveCheckpoint(t *testing.T, env *engineEnv, id repo.PartitionID, src int64, runs ...repo.OffsetRun) {
	t.Helper()
	ctx := context.Background()
	last := runs[len(runs)-1]
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `DELETE FROM offset_map_runs WHERE mirror = $1 AND topic = $2 AND partition = $3`,
		id.Mirror, id.Topic, id.Partition); err != nil {
		t.Fatal(err)
	}
	if err := repo.OffsetRunsRestore(ctx, tx, id, runs); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE mirror_partitions SET src_next = $4, dst_next = $5, updated_at = now()
		WHERE mirror = $1 AND topic = $2 AND partition = $3`,
		id.Mirror, id.Topic, id.Partition, src, last.DstStart+last.Count); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitStateMatches waits until what restore reads from __mirror_state
// says what the database says: every mirror, topic, synced-ACL set,
// partition record and offset map.
func waitStateMatches(t *testing.T, env *engineEnv, dest kafkaconn.Config, what string, timeout time.Duration) {
	t.Helper()
	workertest.WaitFor(t, timeout, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		want, err := databaseLines(ctx, env.Pool)
		if err != nil {
			return false, err.Error()
		}
		latest, err := ReadState(ctx, dest)
		if err != nil {
			return false, err.Error()
		}
		snap, err := service.DecodeState(latest)
		if err != nil {
			return false, err.Error()
		}
		got := stateLines(snap)
		if slices.Equal(got, want) {
			return true, ""
		}
		return false, fmt.Sprintf("__mirror_state:\n\t%s\nthe database:\n\t%s",
			strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	})
}

// stateLines is what a restore takes from __mirror_state, one sorted line
// per record (a partition's chunks as one map).
func stateLines(snap service.StateSnapshot) []string {
	var out []string
	for _, m := range snap.Mirrors {
		out = append(out, mirrorLine(m.Name, m.Source.BootstrapServers, m.Config))
	}
	for _, tr := range snap.Topics {
		out = append(out, topicLine(tr.Mirror, tr.Topic, tr.DesiredState, tr.Partitions))
	}
	for _, a := range snap.SyncedACLs {
		acls := make([]repo.SyncedACL, len(a.ACLs))
		for i, x := range a.ACLs {
			acls[i] = repo.SyncedACL(x)
		}
		if len(acls) > 0 {
			out = append(out, fmt.Sprintf("acls %s %v", a.Mirror, acls))
		}
	}
	for _, p := range snap.Partitions {
		out = append(out, partitionLine(p.Mirror, p.Topic, p.Partition, string(p.State), p.SrcNext, p.DstNext))
	}
	for id, runs := range snap.OffsetMaps {
		out = append(out, fmt.Sprintf("offsets %s/%s/%d %v", id.Mirror, id.Topic, id.Partition, runs))
	}
	slices.Sort(out)
	return out
}

// databaseLines is stateLines from the database's rows.
func databaseLines(ctx context.Context, pool repo.DBTX) ([]string, error) {
	var out []string
	mirrors, err := repo.MirrorsList(ctx, pool)
	if err != nil {
		return nil, err
	}
	for _, m := range mirrors {
		out = append(out, mirrorLine(m.Name, m.BootstrapServers, m.Config))
		topics, err := repo.TopicsList(ctx, pool, m.Name)
		if err != nil {
			return nil, err
		}
		for _, tr := range topics {
			out = append(out, topicLine(tr.Mirror, tr.Topic, tr.DesiredState, tr.Partitions))
		}
		acls, err := repo.SyncedACLsList(ctx, pool, m.Name)
		if err != nil {
			return nil, err
		}
		if len(acls) > 0 {
			out = append(out, fmt.Sprintf("acls %s %v", m.Name, acls))
		}
	}
	parts, err := repo.PartitionsList(ctx, pool, repo.PartitionsListParams{})
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		out = append(out, partitionLine(p.Mirror, p.Topic, p.Partition, string(p.State), p.SrcNext, p.DstNext))
	}
	runs, err := repo.OffsetRunsListAll(ctx, pool)
	if err != nil {
		return nil, err
	}
	for id, rs := range runs {
		out = append(out, fmt.Sprintf("offsets %s/%s/%d %v", id.Mirror, id.Topic, id.Partition, rs))
	}
	slices.Sort(out)
	return out, nil
}

func mirrorLine(name, bootstrap string, config map[string]string) string {
	return fmt.Sprintf("mirror %s %s %v", name, bootstrap, config)
}

func topicLine(mirror, topic string, desired service.DesiredState, partitions int) string {
	return fmt.Sprintf("topic %s/%s %s %d", mirror, topic, desired, partitions)
}

func partitionLine(mirror, topic string, p int32, state string, src, dst *int64) string {
	at := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	}
	return fmt.Sprintf("partition %s/%s/%d %q %s %s", mirror, topic, p, state, at(src), at(dst))
}
