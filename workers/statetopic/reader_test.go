package statetopic

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestDestinationEndsByDestinationName: restore --verify lists the ends of
// the topics the partition records name by their destination names: a
// record's own, or its mirror's topic.name.prefix and the source name for a
// record without one. Two mirrors' orders are two destination topics.
func TestDestinationEndsByDestinationName(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "east.orders"), kfake.SeedTopics(1, "orders"),
		kfake.SeedTopics(1, "west.orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	workertest.Produce(t, addr, "east.orders", 2, 3, kgo.NoCompression())
	workertest.Produce(t, addr, "orders", 1, 7, kgo.NoCompression())
	workertest.Produce(t, addr, "west.orders", 1, 4, kgo.NoCompression())

	snap := service.StateSnapshot{
		Mirrors: []service.MirrorRecord{{Name: "east", Config: map[string]string{service.CfgTopicNamePrefix: "east."}},
			{Name: "plain"}, {Name: "renamed", Config: map[string]string{service.CfgTopicNamePrefix: "x."}}},
		// east's record predates destination names; renamed's names its
		// own, which its prefix would not give.
		Topics: []service.TopicRecord{{Mirror: "east", Topic: "orders"}, {Mirror: "plain", Topic: "orders", DestinationTopic: "orders"},
			{Mirror: "renamed", Topic: "orders", DestinationTopic: "west.orders"}},
		Partitions: []service.PartitionRecord{{Mirror: "east", Topic: "orders", Partition: 0}, {Mirror: "east", Topic: "orders", Partition: 1},
			{Mirror: "plain", Topic: "orders", Partition: 0}, {Mirror: "renamed", Topic: "orders", Partition: 0}},
	}
	ends, err := DestinationEnds(t.Context(), kafkaconn.Config{BootstrapServers: []string{addr}}, snap)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]int64{"east.orders": {0: 3, 1: 3}, "orders": {0: 7}, "west.orders": {0: 4}}
	if !reflect.DeepEqual(ends, want) {
		t.Fatalf("ends %v, want %v", ends, want)
	}
}
