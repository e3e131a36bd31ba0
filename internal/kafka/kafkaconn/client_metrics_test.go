package kafkaconn

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientsPushNoTelemetry: kmirror's clients never ask the brokers for a
// KIP-714 telemetry subscription (so never push), while a consumer with
// franz-go's defaults does against the same broker: the check can fail.
func TestClientsPushNoTelemetry(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	var asked atomic.Int32
	c.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		return nil, nil, false
	})
	ping := func(cl *kgo.Client) {
		t.Helper()
		t.Cleanup(cl.Close)
		if err := cl.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	defaults, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ping(defaults)
	deadline := start.Add(testTimeout)
	for asked.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if asked.Load() == 0 {
		t.Fatal("a client with franz-go's defaults never asked for a telemetry subscription: this test shows nothing")
	}
	took := time.Since(start)

	asked.Store(0)
	ours, err := Config{BootstrapServers: c.ListenAddrs()}.NewClient(kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	ping(ours)
	// A negative needs a bounded wait: ten times what the default client
	// took to ask.
	time.Sleep(max(10*took, 200*time.Millisecond))
	if n := asked.Load(); n != 0 {
		t.Fatalf("kmirror's client asked for a telemetry subscription %d times", n)
	}
}
