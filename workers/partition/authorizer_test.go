package partition_test

import (
	"context"
	"testing"
	"time"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScenarioReadOnlyNotEnforcedWithoutAuthorizer: a destination that
// lets every client in as ANONYMOUS (as kmirror dev's does) cannot enforce
// the DENY WRITE ACL, so the topic is not reported read-only enforced, and
// indeed a foreign write gets through.
func TestScenarioReadOnlyNotEnforcedWithoutAuthorizer(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 1, 5, kgo.NoCompression())
	env.CreateMirror("m", "orders")
	env.StartInstance("i1")
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	workertest.WaitFor(t, 20*time.Second, "read_only_enforced to be recorded", func() (bool, string) {
		v := env.readOnlyEnforced("m", "orders")
		if v == nil {
			return false, "null"
		}
		if *v {
			t.Fatal("read_only_enforced = true on a destination without an authorizer")
		}
		return true, ""
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatalf("foreign write refused, so the destination does enforce: %v", err)
	}
}
