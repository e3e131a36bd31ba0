package partition_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/statetopic"
	"kmirror/workers/workertest"
)

// TestScenarioContinueOverAStateTopicNotUnderstood: the source's
// __mirror_state holds a key this kmirror does not know (a newer kmirror,
// or another writer). An add's dry run with continue answered 500 (issue
// 45); it now gives the reason the add's partitions show, as a conflict.
func TestScenarioContinueOverAStateTopicNotUnderstood(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	src := env.Clusters.SourceAddr()
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.Clusters.Source.CreateTopic(service.StateTopic, 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.ProduceRecords(t, workertest.Plain(src),
		&kgo.Record{Topic: service.StateTopic, Key: []byte("future/x"), Value: []byte(`{}`)})
	workertest.Produce(t, src, "orders", 1, 5, kgo.NoCompression())
	// The destination holds records already: continuing must prove them.
	if err := env.Clusters.Destination.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.DestinationAddr(), "orders", 1, 3, kgo.NoCompression())
	if _, err := env.Svc.CreateMirror(t.Context(), service.MirrorInput{Name: "m",
		Source: service.SourceInput{BootstrapServers: src}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	svc, err := service.NewControl(service.Config{Pool: env.Pool, Catalog: service.KafkaCatalog(5 * time.Second),
		Destination: workertest.Plain(env.Clusters.DestinationAddr()), SourceState: statetopic.ReadState})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.AddTopics(t.Context(), "m", service.AddTopicsInput{Topic: "orders", Continue: true, DryRun: true})
	var conflict *service.ConflictError
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(), `unknown key "future/x"`) {
		t.Fatalf("dry run: %v, want a conflict naming the unknown key", err)
	}

	// The add itself: its partition shows the same reason while it waits.
	if _, err := env.Svc.AddTopics(t.Context(), "m", service.AddTopicsInput{Topic: "orders", Continue: true}); err != nil {
		t.Fatal(err)
	}
	env.StartInstanceOpts("i1", workertest.InstanceOpts{SourceState: statetopic.ReadState})
	workertest.WaitFor(t, 20*time.Second, "the partition showing the unknown key", func() (bool, string) {
		msg := env.Partition("m", "orders", 0).Error
		return strings.Contains(msg, `unknown key "future/x"`), msg
	})
}
