package batchproduce

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPresizedEncodesTheSameBytesInOneAllocation: a presized request
// encodes exactly as the request does, at every produce version, and grows
// kgo's small pooled buffer once instead of doubling it.
func TestPresizedEncodesTheSameBytesInOneAllocation(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	for _, name := range []string{"orders", "a-much-longer-topic-name-than-most"} {
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic, tp.TopicID = name, [16]byte{1, 2, 3}
		for p := range int32(3) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, bytes.Repeat([]byte{byte(p)}, 300<<10)
			tp.Partitions = append(tp.Partitions, rp)
		}
		req.Topics = append(req.Topics, tp)
	}
	for v := int16(3); v <= req.MaxVersion(); v++ {
		req.SetVersion(v)
		want := req.AppendTo(nil)
		got := presized{req}.AppendTo(make([]byte, 0, 1<<10))
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: the presized request encodes differently", v)
		}
	}
	pooled := make([]byte, 0, 1<<10)
	if n := testing.AllocsPerRun(10, func() { _ = presized{req}.AppendTo(pooled[:0]) }); n > 1 {
		t.Fatalf("%.0f allocations to encode, want the one", n)
	}
}
