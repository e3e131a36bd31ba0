package workers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafkaconn"
	"kmirror/repo"
	"kmirror/service"
)

// Helpers of the scenario_*_test.go data-plane tests. They add to the
// harness in engine_env_test.go without changing it.

// startInstanceWith is startInstance with an explicit destination connection
// (for a destination that needs SASL).
func (env *engineEnv) startInstanceWith(id string, dest kafkaconn.Config) *instance {
	env.t.Helper()
	ctx := context.Background()
	log := testLogger().With("test", env.t.Name())
	eng, err := NewEngine(EngineConfig{Pool: env.pool, Service: env.svc, InstanceID: id, Destination: dest,
		Logger: log, DeliveryTimeout: time.Second, CheckpointInterval: 200 * time.Millisecond,
		OffsetsInterval: 300 * time.Millisecond, DesiredInterval: 100 * time.Millisecond,
		Retry: RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second}})
	if err != nil {
		env.t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		env.t.Fatal(err)
	}
	hb, err := NewHeartbeat(HeartbeatConfig{Pool: env.pool, InstanceID: id, Interval: engineRenew})
	if err != nil {
		env.t.Fatal(err)
	}
	if err := hb.Start(ctx); err != nil {
		env.t.Fatal(err)
	}
	lm, err := NewLeaseManager(LeaseManagerConfig{Pool: env.pool, InstanceID: id, TTL: engineTTL,
		RenewInterval: engineRenew, Margin: engineMargin, Logger: log, Partitions: eng})
	if err != nil {
		env.t.Fatal(err)
	}
	if err := lm.Start(ctx); err != nil {
		env.t.Fatal(err)
	}
	in := &instance{id: id, hb: hb, leases: lm, engine: eng}
	env.t.Cleanup(in.stop)
	return in
}

// kill simulates a crash of the instance: its lease loop ends and its
// workers vanish without releasing anything (LeaseManager.kill, the lease
// tests' hook), and its heartbeat goes silent without marking the instance
// stopped. Its leases stay in the database until they expire. The engine is
// left with no workers; the cleanup registered by startInstance closes it.
func (in *instance) kill() {
	in.leases.kill()
	if in.hb.cancel != nil {
		in.hb.cancel()
		in.hb.done.Wait()
	}
}

// partition returns one describe row.
func (env *engineEnv) partition(mirror, topic string, p int32) repo.Partition {
	env.t.Helper()
	row, err := repo.PartitionsGet(context.Background(), env.pool, mirror, topic, p)
	if err != nil {
		env.t.Fatalf("partition %s/%s/%d: %v", mirror, topic, p, err)
	}
	return row
}

func describePartition(p repo.Partition) string {
	s := fmt.Sprintf("%s/%d=%s", p.Topic, p.Partition, service.PartitionState(p.State))
	if p.Error != "" {
		s += fmt.Sprintf("(%q retryable=%v attempt=%d)", p.Error, p.Retryable, p.RetryAttempt)
	}
	if p.SrcNext != nil && p.DstNext != nil {
		s += fmt.Sprintf(" cp=(%d,%d)", *p.SrcNext, *p.DstNext)
	}
	if p.SourceEndOffset != nil {
		s += fmt.Sprintf(" srcEnd=%d", *p.SourceEndOffset)
	}
	if p.LostRecords > 0 {
		s += fmt.Sprintf(" lost=%d", p.LostRecords)
	}
	return s
}

// waitPartition waits until cond holds for one partition's row.
func (env *engineEnv) waitPartition(mirror, topic string, p int32, timeout time.Duration, what string, cond func(repo.Partition) bool) repo.Partition {
	env.t.Helper()
	var last repo.Partition
	waitFor(env.t, timeout, fmt.Sprintf("%s/%d: %s", topic, p, what), func() (bool, string) {
		last = env.partition(mirror, topic, p)
		return cond(last), describePartition(last)
	})
	return last
}

// stateEventRE parses a partition.state event message.
var stateEventRE = regexp.MustCompile(`^(\S+)/(\d+): ([A-Z]+) → ([A-Z]+)`)

// stateEvents returns the "FROM → TO" steps the events table recorded for
// one partition, oldest first, and the full messages.
func (env *engineEnv) stateEvents(mirror, topic string, p int32) (steps, msgs []string) {
	env.t.Helper()
	evs, err := repo.EventsList(context.Background(), env.pool, repo.EventsListParams{Mirror: mirror, Limit: 10000})
	if err != nil {
		env.t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind != service.EventPartitionState {
			continue
		}
		m := stateEventRE.FindStringSubmatch(e.Message)
		if m == nil {
			env.t.Fatalf("unparsable partition.state event %q", e.Message)
		}
		if m[1] != topic || m[2] != fmt.Sprint(p) {
			continue
		}
		if e.Topic != topic || e.Partition == nil || *e.Partition != p {
			env.t.Fatalf("event %q has topic %q partition %v", e.Message, e.Topic, e.Partition)
		}
		steps = append(steps, m[3]+" → "+m[4])
		msgs = append(msgs, e.Message)
	}
	return steps, msgs
}

// readOnlyEnforced returns mirror_topics.read_only_enforced (nil unknown).
func (env *engineEnv) readOnlyEnforced(mirror, topic string) *bool {
	env.t.Helper()
	var v *bool
	if err := env.pool.QueryRow(context.Background(), `SELECT read_only_enforced FROM mirror_topics
		WHERE mirror = $1 AND topic = $2`, mirror, topic).Scan(&v); err != nil {
		env.t.Fatal(err)
	}
	return v
}

// endOffsets lists the end (high watermark) offsets of a topic's partitions.
func endOffsets(t *testing.T, conn kafkaconn.Config, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

func plain(addr string) kafkaconn.Config {
	return kafkaconn.Config{BootstrapServers: []string{addr}}
}

// waitEndsEqual waits until every partition of the destination topic has
// the same end offset as the source (for sources without transactions or
// gaps, that is "caught up"), then checks the records.
func waitEndsEqual(t *testing.T, env *engineEnv, topic string, partitions int32, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "destination "+topic+" end offsets to reach the source's", func() (bool, string) {
		src := endOffsets(t, plain(env.clusters.SourceAddr()), topic)
		var dst map[int32]int64
		if destHasTopic(env, topic) {
			dst = endOffsets(t, plain(env.clusters.DestinationAddr()), topic)
		}
		ok := len(src) == int(partitions)
		var lag []string
		for p := int32(0); p < partitions; p++ {
			if src[p] != dst[p] {
				ok = false
				lag = append(lag, fmt.Sprintf("p%d %d/%d", p, dst[p], src[p]))
			}
		}
		return ok, strings.Join(lag, " ")
	})
	assertMirrored(t, env, topic, partitions)
}

// produceRecords writes records synchronously with a plain client.
func produceRecords(t *testing.T, conn kafkaconn.Config, rs ...*kgo.Record) {
	t.Helper()
	cl, err := conn.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// seq returns n records for one partition with values prefix-0, prefix-1…
func seq(topic string, p int32, prefix string, n int) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("%s-k%d", prefix, i)),
			Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return rs
}

// kcatPath returns kcat's path, skipping the test when it is missing
// outside CI (in CI it must be installed).
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kcat is required in CI: %v", err)
		}
		t.Skip("kcat not installed")
	}
	return p
}

// kcat runs kcat with stdin and returns its combined output.
func kcat(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// kcatProduce produces lines to one partition with kcat -P, with extra
// arguments (security, -K, -H…). librdkafka reports a failed delivery on
// stderr; kcat's exit status alone does not always say so.
func kcatProduce(t *testing.T, addr, topic string, p int32, stdin string, extra ...string) error {
	t.Helper()
	args := append([]string{"-b", addr, "-P", "-t", topic, "-p", fmt.Sprint(p),
		"-X", "message.timeout.ms=5000", "-X", "topic.metadata.refresh.interval.ms=500"}, extra...)
	out, err := kcat(t, stdin, args...)
	if err == nil && strings.Contains(out, "ERROR") {
		err = errors.New("kcat reported an error")
	}
	if err != nil {
		return fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// holdsFor is a deliberate observation window: cond must stay true for d
// (checked every 50ms); it fails the test at the first violation.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	for end := time.Now().Add(d); ; {
		if ok, state := cond(); !ok {
			t.Fatalf("%s did not hold: %s", what, state)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startMirrored creates a source topic "orders" with records, mirrors it as
// mirror "m" on instance "i1", and waits until the destination caught up.
func (env *engineEnv) startMirrored(topic string, partitions int32, records int) *instance {
	env.t.Helper()
	if err := env.clusters.Source.CreateTopic(topic, partitions, nil); err != nil {
		env.t.Fatal(err)
	}
	produce(env.t, env.clusters.SourceAddr(), topic, partitions, records, kgo.NoCompression())
	env.createMirror("m", topic)
	in := env.startInstance("i1")
	env.waitStates("m", service.StateMirroring, 20*time.Second)
	waitEndsEqual(env.t, env, topic, partitions, 20*time.Second)
	return in
}
