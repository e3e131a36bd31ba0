package partition_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioSeedStart: the seed's "starting a mirror" scenario. Each
// partition goes UNKNOWN → PREPARING → MIRRORING, and the events table holds
// exactly those steps, nothing more, also once records flow.
func TestScenarioSeedStart(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 20*time.Second)

	want := []string{"UNKNOWN → PREPARING", "PREPARING → MIRRORING"}
	for p := int32(0); p < 2; p++ {
		steps, msgs := env.stateEvents("m", "orders", p)
		if !slices.Equal(steps, want) {
			t.Fatalf("orders/%d state events: got %q, want %q", p, msgs, want)
		}
		if !strings.HasPrefix(msgs[0], fmt.Sprintf("orders/%d: UNKNOWN → PREPARING", p)) {
			t.Fatalf("event message %q", msgs[0])
		}
		row := env.Partition("m", "orders", p)
		if row.PreviousState != service.StatePreparing || row.Error != "" || row.RetryAttempt != 0 {
			t.Fatalf("orders/%d row: %s previous=%s", p, describePartition(row), row.PreviousState)
		}
	}
}

// TestScenarioPauseResume: while paused nothing reaches the destination, the
// source end offset keeps being refreshed so lag grows, and resume catches
// up from the checkpoint without alignment.
func TestScenarioPauseResume(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 10)

	ctx := context.Background()
	if _, err := env.Svc.PauseTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StatePaused, 10*time.Second)
	dst := workertest.Plain(env.Clusters.DestinationAddr())
	before := workertest.EndOffsets(t, dst, "orders")

	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 15, kgo.NoCompression())
	// Lag stays true while paused: the source end offset is refreshed.
	for p := int32(0); p < 2; p++ {
		env.waitPartition("m", "orders", p, 10*time.Second, "source_end_offset 25 while paused", func(r repo.Partition) bool {
			return r.State == service.StatePaused && r.SourceEndOffset != nil && *r.SourceEndOffset == 25
		})
		row := env.Partition("m", "orders", p)
		if row.SrcNext == nil || *row.SourceEndOffset-*row.SrcNext != 15 {
			t.Fatalf("orders/%d: lag should be 15 while paused: %s", p, describePartition(row))
		}
	}
	// A deliberate observation window: nothing may arrive while paused.
	workertest.HoldsFor(t, time.Second, "paused destination stays put", func() (bool, string) {
		if got := workertest.EndOffsets(t, dst, "orders"); !maps.Equal(got, before) {
			return false, fmt.Sprintf("destination moved while paused: %v, was %v", got, before)
		}
		for _, r := range env.Partitions("m") {
			if r.State != service.StatePaused {
				return false, "left PAUSED by itself: " + describePartition(r)
			}
		}
		return true, ""
	})

	if _, err := env.Svc.ResumeTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateMirroring, 10*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 20*time.Second)
	for p := int32(0); p < 2; p++ {
		steps, msgs := env.stateEvents("m", "orders", p)
		want := []string{"UNKNOWN → PREPARING", "PREPARING → MIRRORING", "MIRRORING → PAUSING",
			"PAUSING → PAUSED", "PAUSED → MIRRORING"}
		if !slices.Equal(steps, want) {
			t.Fatalf("orders/%d state events: got %q, want %q", p, msgs, want)
		}
		env.waitPartition("m", "orders", p, 5*time.Second, "lag 0 after resume", func(r repo.Partition) bool {
			return r.SrcNext != nil && r.SourceEndOffset != nil && *r.SourceEndOffset == 25 && *r.SrcNext == 25
		})
	}
}

// TestScenarioFailover: remove (failover) goes MIRRORING → STOPPING →
// STOPPED, after which an independent client (kcat) can write to the
// destination topic.
func TestScenarioFailover(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 1, 10)

	if _, err := env.Svc.RemoveTopics(context.Background(), "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 10*time.Second)
	steps, msgs := env.stateEvents("m", "orders", 0)
	want := []string{"UNKNOWN → PREPARING", "PREPARING → MIRRORING", "MIRRORING → STOPPING", "STOPPING → STOPPED"}
	if !slices.Equal(steps, want) {
		t.Fatalf("state events: got %q, want %q", msgs, want)
	}
	row := env.Partition("m", "orders", 0)
	if row.SrcNext == nil || *row.SrcNext != 10 || *row.DstNext != 10 {
		t.Fatalf("last mirrored offsets not persisted: %s", describePartition(row))
	}
	if err := kcatProduce(t, env.Clusters.DestinationAddr(), "orders", 0, "after-failover\n"); err != nil {
		t.Fatal(err)
	}
	recs := workertest.ReadAll(t, env.Clusters.DestinationAddr(), "orders", 0, false)
	if len(recs) != 11 || string(recs[10].Value) != "after-failover" {
		t.Fatalf("destination after failover has %d records", len(recs))
	}
}

// aclEnv is a destination with SASL/PLAIN and an authorizer: kmirror is the
// super user admin; app is an ordinary user allowed everything on orders,
// so only kmirror's DENY can stop it.
func newACLEnv(t *testing.T) (*engineEnv, kafkaconn.Config) {
	t.Helper()
	allowApp := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders",
		Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	// The app was given kmirror's own topics too, by mistake or malice.
	allowInternal := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "__mirror_",
		Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationAll, Allow: true}
	env := newEngineEnv(t, devcluster.Config{DestinationOpts: []kfake.Opt{
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"), kfake.EnableACLs(),
		kfake.User("PLAIN", "app", "app-secret", allowApp, allowInternal)}})
	admin := kafkaconn.Config{BootstrapServers: []string{env.Clusters.DestinationAddr()},
		Security: kafkaconn.Security{Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN",
			SASLUsername: "admin", SASLPassword: "secret"}}
	return env, admin
}

// appProduce writes one record to orders/0 as the ordinary user app with
// franz-go. (kcat cannot be used here: librdkafka needs SaslHandshake v0,
// which kfake does not offer, so it refuses SASL/PLAIN against kfake.)
func appProduce(t *testing.T, addr, value string) error {
	t.Helper()
	return appProduceTo(t, addr, "orders", value)
}

// appProduceTo writes one record to topic's partition 0 as app.
func appProduceTo(t *testing.T, addr, topic, value string) error {
	t.Helper()
	conn := kafkaconn.Config{BootstrapServers: []string{addr}, Security: kafkaconn.Security{
		Protocol: "SASL_PLAINTEXT", SASLMechanism: "PLAIN", SASLUsername: "app", SASLPassword: "app-secret"}}
	cl, err := conn.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(2), kgo.UnknownTopicRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)}).FirstErr()
}

// TestScenarioFailoverReadOnlyACL: with an authorizer on the destination,
// a mirrored topic is read-only for everyone but kmirror (DENY WRITE for
// User:*) while MIRRORING, and writable again once STOPPED; kmirror's own
// topics stay kmirror's alone (kafkaconn.InternalTopicsACL).
func TestScenarioFailoverReadOnlyACL(t *testing.T) {
	t.Parallel()
	env, admin := newACLEnv(t)
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 1, 10, kgo.NoCompression())
	env.CreateMirror("m", "orders")
	env.StartInstanceOpts("i1", workertest.InstanceOpts{Dest: admin})
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitFor(t, 20*time.Second, "destination to catch up", func() (bool, string) {
		got := workertest.EndOffsets(t, admin, "orders")[0]
		return got == 10, fmt.Sprint(got)
	})
	if v := env.readOnlyEnforced("m", "orders"); v == nil || !*v {
		t.Fatalf("read_only_enforced = %v, want true", v)
	}
	addr := env.Clusters.DestinationAddr()
	if err := appProduce(t, addr, "denied"); err == nil {
		t.Fatal("app could write to a mirrored topic")
	} else if !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("app write failed for another reason: %v", err)
	}
	if got := workertest.EndOffsets(t, admin, "orders")[0]; got != 10 {
		t.Fatalf("destination end %d after denied writes, want 10", got)
	}
	// kmirror's own topics are kmirror's alone, even for a user granted
	// them (issue 45: a forged heartbeat made two instances copy).
	adm, err := admin.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for _, topic := range []string{"__mirror_heartbeats", "__mirror_state"} {
		if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatal(err)
		}
	}
	internalDenied := func(when string) {
		t.Helper()
		for _, topic := range []string{"__mirror_heartbeats", "__mirror_state"} {
			if err := appProduceTo(t, addr, topic, "forged"); err == nil || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
				t.Fatalf("%s: app's write to %s: %v, want TOPIC_AUTHORIZATION_FAILED", when, topic, err)
			}
		}
	}
	internalDenied("while mirroring")

	if _, err := env.Svc.RemoveTopics(context.Background(), "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 10*time.Second)
	if v := env.readOnlyEnforced("m", "orders"); v == nil || *v {
		t.Fatalf("read_only_enforced = %v after STOPPED, want false", v)
	}
	if err := appProduce(t, addr, "allowed"); err != nil {
		t.Fatalf("app write after failover: %v", err)
	}
	internalDenied("after failover")
	if got := workertest.EndOffsets(t, admin, "orders")[0]; got != 11 {
		t.Fatalf("destination end %d after failover writes, want 11", got)
	}
}

// TestScenarioRestartStopped: a stopped topic with no writes on the
// destination restarts STOPPED → PREPARING → MIRRORING and catches up.
func TestScenarioRestartStopped(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 10)
	ctx := context.Background()
	if _, err := env.Svc.RemoveTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 10*time.Second)

	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 10, kgo.NoCompression())
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(t, env.Env, "orders", 2, 20*time.Second)
	for p := int32(0); p < 2; p++ {
		steps, msgs := env.stateEvents("m", "orders", p)
		want := []string{"UNKNOWN → PREPARING", "PREPARING → MIRRORING", "MIRRORING → STOPPING",
			"STOPPING → STOPPED", "STOPPED → PREPARING", "PREPARING → MIRRORING"}
		if !slices.Equal(steps, want) {
			t.Fatalf("orders/%d state events: got %q, want %q", p, msgs, want)
		}
	}
}

// TestScenarioRestartAfterDivergentWrites: records written to the
// destination while the topic was STOPPED are not the source's; a restart
// must fail with a divergence, and not retry.
func TestScenarioRestartAfterDivergentWrites(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("orders", 2, 10)
	ctx := context.Background()
	if _, err := env.Svc.RemoveTopics(ctx, "m", "orders"); err != nil {
		t.Fatal(err)
	}
	env.WaitStates("m", service.StateStopped, 10*time.Second)

	// Partition 0: more foreign records than the source has new ones.
	// Partition 1: as many, so the walk succeeds but the records differ.
	if err := kcatProduce(t, env.Clusters.DestinationAddr(), "orders", 0, "app-1\napp-2\n"); err != nil {
		t.Fatal(err)
	}
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.DestinationAddr()), seq("orders", 1, "app", 3)...)
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("orders", 1, "src", 5)...)
	if _, err := env.Svc.AddTopics(ctx, "m", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		row := env.waitPartition("m", "orders", p, 20*time.Second, "FAILED, not retryable", func(r repo.Partition) bool {
			return r.State == service.StateFailed && !r.Retryable
		})
		if !strings.Contains(row.Error, "divergence") {
			t.Fatalf("orders/%d error does not say divergence: %q", p, row.Error)
		}
	}
	// Not retried: it stays FAILED and the destination is untouched.
	dstBefore := workertest.EndOffsets(t, workertest.Plain(env.Clusters.DestinationAddr()), "orders")
	// A deliberate observation window for a retry that must not come.
	workertest.HoldsFor(t, 500*time.Millisecond, "FAILED without retry", func() (bool, string) {
		for p := int32(0); p < 2; p++ {
			row := env.Partition("m", "orders", p)
			if row.State != service.StateFailed || row.Retryable || row.NextRetryAt != nil {
				return false, describePartition(row)
			}
		}
		return true, ""
	})
	for p := int32(0); p < 2; p++ {
		steps, msgs := env.stateEvents("m", "orders", p)
		restart := slices.Index(steps, "STOPPED → PREPARING")
		if n := len(steps); n == 0 || steps[n-1] != "PREPARING → FAILED" || restart < 0 ||
			slices.Contains(steps[restart:], "PREPARING → MIRRORING") {
			t.Fatalf("orders/%d state events: %q", p, msgs)
		}
	}
	if got := workertest.EndOffsets(t, workertest.Plain(env.Clusters.DestinationAddr()), "orders"); !maps.Equal(got, dstBefore) ||
		got[0] != 12 || got[1] != 13 {
		t.Fatalf("destination changed after the divergence: %v (was %v)", got, dstBefore)
	}
}
