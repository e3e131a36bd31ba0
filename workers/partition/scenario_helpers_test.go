package partition_test

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

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// Helpers of the scenario_*_test.go data-plane tests, on top of the shared
// harness in workers/workertest.

// engineEnv is the shared test world with this package's helpers.
type engineEnv struct{ *workertest.Env }

func newEngineEnv(t *testing.T, cfg devcluster.Config) *engineEnv {
	return &engineEnv{workertest.NewEnv(t, cfg)}
}

func describePartition(p repo.Partition) string {
	s := fmt.Sprintf("%s/%d=%s", p.Topic, p.Partition, p.State)
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
	env.T.Helper()
	var last repo.Partition
	workertest.WaitFor(env.T, timeout, fmt.Sprintf("%s/%d: %s", topic, p, what), func() (bool, string) {
		last = env.Partition(mirror, topic, p)
		return cond(last), describePartition(last)
	})
	return last
}

// stateEventRE parses a partition.state event message.
var stateEventRE = regexp.MustCompile(`^(\S+)/(\d+): ([A-Z]+) → ([A-Z]+)`)

// stateEvents returns the "FROM → TO" steps the events table recorded for
// one partition, oldest first, and the full messages.
func (env *engineEnv) stateEvents(mirror, topic string, p int32) (steps, msgs []string) {
	env.T.Helper()
	evs, err := repo.EventsList(context.Background(), env.Pool, repo.EventsListParams{Mirror: mirror, Limit: 10000})
	if err != nil {
		env.T.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind != service.EventPartitionState {
			continue
		}
		m := stateEventRE.FindStringSubmatch(e.Message)
		if m == nil {
			env.T.Fatalf("unparsable partition.state event %q", e.Message)
		}
		if m[1] != topic || m[2] != fmt.Sprint(p) {
			continue
		}
		if e.Topic != topic || e.Partition == nil || *e.Partition != p {
			env.T.Fatalf("event %q has topic %q partition %v", e.Message, e.Topic, e.Partition)
		}
		steps = append(steps, m[3]+" → "+m[4])
		msgs = append(msgs, e.Message)
	}
	return steps, msgs
}

// readOnlyEnforced returns mirror_topics.read_only_enforced (nil unknown).
func (env *engineEnv) readOnlyEnforced(mirror, topic string) *bool {
	env.T.Helper()
	var v *bool
	if err := env.Pool.QueryRow(context.Background(), `SELECT read_only_enforced FROM mirror_topics
		WHERE mirror = $1 AND topic = $2`, mirror, topic).Scan(&v); err != nil {
		env.T.Fatal(err)
	}
	return v
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

// startMirrored creates a source topic "orders" with records, mirrors it as
// mirror "m" on instance "i1", and waits until the destination caught up.
func (env *engineEnv) startMirrored(topic string, partitions int32, records int) *workertest.Instance {
	env.T.Helper()
	if err := env.Clusters.Source.CreateTopic(topic, partitions, nil); err != nil {
		env.T.Fatal(err)
	}
	workertest.Produce(env.T, env.Clusters.SourceAddr(), topic, partitions, records, kgo.NoCompression())
	env.CreateMirror("m", topic)
	in := env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitEndsEqual(env.T, env.Env, topic, partitions, 20*time.Second)
	return in
}

// sourceTopicID is the source topic's id, by which fetches from v13 on name
// it, for tests that answer the source's fetches themselves.
func (env *engineEnv) sourceTopicID(topic string) [16]byte {
	env.T.Helper()
	adm, err := workertest.Plain(env.Clusters.SourceAddr()).NewAdmin()
	if err != nil {
		env.T.Fatal(err)
	}
	defer adm.Close()
	md, err := adm.Metadata(context.Background(), topic)
	if err != nil {
		env.T.Fatal(err)
	}
	return md.Topics[topic].ID
}
