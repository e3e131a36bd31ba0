package workertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
)

// Plain is a PLAINTEXT connection to addr.
func Plain(addr string) kafkaconn.Config {
	return kafkaconn.Config{BootstrapServers: []string{addr}}
}

// ReadAll reads every record of a topic partition from its log start up to
// the high watermark (the last stable offset when readCommitted).
func ReadAll(t testing.TB, addr, topic string, partition int32, readCommitted bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn := Plain(addr)
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	off, err := kafkaconn.ReadOffsets(ctx, adm, topic, partition, readCommitted)
	if err != nil {
		t.Fatalf("offsets of %s/%d at %s: %v", topic, partition, addr, err)
	}
	recs, err := kafkaconn.ReadRecords(ctx, conn, topic, partition, off.Start, off.End, int(off.End-off.Start)+1, readCommitted)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// AssertMirrored checks that each partition of the destination topic holds
// exactly the source's committed records, in order, with nothing extra.
func AssertMirrored(t testing.TB, env *Env, topic string, partitions int32) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		src := ReadAll(t, env.Clusters.SourceAddr(), topic, p, true)
		dst := ReadAll(t, env.Clusters.DestinationAddr(), topic, p, false)
		if len(src) != len(dst) {
			t.Fatalf("%s/%d: source has %d records, destination %d", topic, p, len(src), len(dst))
		}
		for i := range src {
			if err := kafkaconn.SameRecord(src[i], dst[i]); err != nil {
				t.Fatalf("%s/%d record %d (source offset %d, destination %d): %v", topic, p, i, src[i].Offset, dst[i].Offset, err)
			}
		}
	}
}

// WaitMirrored waits until the destination has as many records as the
// source's committed records in every partition, then checks them.
func WaitMirrored(t testing.TB, env *Env, topic string, partitions int32, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, "destination "+topic+" to catch up", func() (bool, string) {
		desc := ""
		ok := true
		for p := int32(0); p < partitions; p++ {
			s := len(ReadAll(t, env.Clusters.SourceAddr(), topic, p, true))
			d := 0
			if env.DestHasTopic(topic) {
				d = len(ReadAll(t, env.Clusters.DestinationAddr(), topic, p, false))
			}
			desc += fmt.Sprintf("p%d %d/%d ", p, d, s)
			if s != d {
				ok = false
			}
		}
		return ok, desc
	})
	AssertMirrored(t, env, topic, partitions)
}

// WaitEndsEqual waits until every partition of the destination topic has
// the same end offset as the source (for sources without transactions or
// gaps, that is "caught up"), then checks the records.
func WaitEndsEqual(t testing.TB, env *Env, topic string, partitions int32, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, "destination "+topic+" end offsets to reach the source's", func() (bool, string) {
		src := EndOffsets(t, Plain(env.Clusters.SourceAddr()), topic)
		var dst map[int32]int64
		if env.DestHasTopic(topic) {
			dst = EndOffsets(t, Plain(env.Clusters.DestinationAddr()), topic)
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
	AssertMirrored(t, env, topic, partitions)
}

// CreateSourceTopics creates topics of the given partition count on the
// source over the Kafka protocol, so it works whether the clusters run in
// this process or in a child (devcluster.Config.Process).
func (env *Env) CreateSourceTopics(partitions int32, topics ...string) {
	env.TB.Helper()
	createTopics(env.TB, env.Clusters.SourceAddr(), "source", partitions, topics)
}

// CreateDestinationTopics is CreateSourceTopics on the destination.
func (env *Env) CreateDestinationTopics(partitions int32, topics ...string) {
	env.TB.Helper()
	createTopics(env.TB, env.Clusters.DestinationAddr(), "destination", partitions, topics)
}

func createTopics(tb testing.TB, addr, role string, partitions int32, topics []string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, err := Plain(addr).NewAdmin()
	if err != nil {
		tb.Fatal(err)
	}
	defer adm.Close()
	resps, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		tb.Fatalf("create %s topics: %v", role, err)
	}
}

// DeleteTopics deletes topics from both clusters, where they exist.
func (env *Env) DeleteTopics(topics ...string) {
	env.TB.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, addr := range []string{env.Clusters.SourceAddr(), env.Clusters.DestinationAddr()} {
		adm, err := Plain(addr).NewAdmin()
		if err != nil {
			env.TB.Fatal(err)
		}
		resps, err := adm.DeleteTopics(ctx, topics...)
		adm.Close()
		if err == nil {
			for _, r := range resps {
				if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
					err = r.Err
				}
			}
		}
		if err != nil {
			env.TB.Fatalf("delete topics on %s: %v", addr, err)
		}
	}
}

// DestHasTopic reports whether the destination cluster has the topic.
func (env *Env) DestHasTopic(topic string) bool {
	return env.Clusters.Destination.TopicInfo(topic) != nil
}

// EndOffsets lists the end (high watermark) offsets of a topic's partitions.
func EndOffsets(t testing.TB, conn kafkaconn.Config, topic string) map[int32]int64 {
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

// Produce writes n records to every partition of a source topic, with keys,
// repeated headers and explicit timestamps, using the given compression.
func Produce(t testing.TB, addr, topic string, partitions int32, n int, codec kgo.CompressionCodec) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.UnixMilli(1_700_000_000_000)
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k-%d-%d", p, i)),
				Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i)), Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}, {Key: "nil", Value: nil}}}
			if i%7 == 0 {
				r.Key = nil
			}
			if i%11 == 0 {
				r.Value = nil
			}
			rs = append(rs, r)
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// ProduceRecords writes records synchronously with a plain client.
func ProduceRecords(t testing.TB, conn kafkaconn.Config, rs ...*kgo.Record) {
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
