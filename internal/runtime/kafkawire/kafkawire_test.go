package kafkawire_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"kmirror/internal/runtime/kafkaconn"
	"kmirror/internal/runtime/kafkawire"
	"kmirror/internal/testing/testcert"
)

// batch is an uncompressed v2 record batch of n records with the given
// values' prefix, produced by no producer.
func batch(prefix string, n int) []byte {
	var raw []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
		body := r.AppendTo(nil)[1:] // the zero length is one byte
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: raw}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// TestProduceBodyMatchesKmsg: the request body written in parts is, byte
// for byte, what kmsg encodes, at every version it is sent at.
func TestProduceBodyMatchesKmsg(t *testing.T) {
	topics := []kafkawire.ProduceTopic{
		{Topic: "orders", Partitions: []kafkawire.ProducePartition{{Partition: 0, Records: batch("a", 3)}, {Partition: 7, Records: batch("b", 1)}}},
		{Topic: "a-much-longer-topic-name." + string(bytes.Repeat([]byte("x"), 150)), Partitions: []kafkawire.ProducePartition{{Partition: 2, Records: batch("c", 200)}}},
	}
	for v := int16(3); v <= 12; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = -1, 4000
		for _, pt := range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = pt.Topic
			for _, pp := range pt.Partitions {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = pp.Partition, pp.Records
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		want := req.AppendTo(nil)
		got := bytes.Join(kafkawire.AppendProduce(v, -1, 4000, topics), nil)
		if !bytes.Equal(got, want) {
			t.Errorf("v%d: %d bytes differ from kmsg's %d", v, len(got), len(want))
		}
	}
}

// counter counts the requests kgo's E2E hook is told of, by key.
type counter struct {
	mu   sync.Mutex
	keys map[int16]int
	errs int
}

func (c *counter) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[int16]int{}
	}
	c.keys[key]++
	if e.Err() != nil {
		c.errs++
	}
}

func (c *counter) count(key int16) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys[key]
}

// TestProduceOverEverySecurityProtocol: connections are opened as the
// client opens its own (TLS, each SASL mechanism), a produce lands, and
// the client's hooks hear of it.
func TestProduceOverEverySecurityProtocol(t *testing.T) {
	dir := t.TempDir()
	testcert.WritePair(t, filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), 1)
	certPEM, _ := os.ReadFile(filepath.Join(dir, "c.pem"))
	keyPEM, _ := os.ReadFile(filepath.Join(dir, "k.pem"))
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	sasl := func(mech string) kafkaconn.Security {
		return kafkaconn.Security{Protocol: kafkaconn.ProtocolSASLPlaintext, SASLMechanism: mech, SASLUsername: "admin", SASLPassword: "secret"}
	}
	cases := []struct {
		name string
		opts []kfake.Opt
		sec  kafkaconn.Security
	}{
		{"PLAINTEXT", nil, kafkaconn.Security{}},
		{"SASL_PLAIN", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret")}, sasl("PLAIN")},
		{"SCRAM-SHA-256", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "secret")}, sasl("SCRAM-SHA-256")},
		{"SCRAM-SHA-512", []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "secret")}, sasl("SCRAM-SHA-512")},
		{"SSL", []kfake.Opt{kfake.TLS(serverTLS)}, kafkaconn.Security{Protocol: kafkaconn.ProtocolSSL, TLSCAPEM: string(certPEM)}},
		{"SASL_SSL", []kfake.Opt{kfake.TLS(serverTLS), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "secret")},
			kafkaconn.Security{Protocol: kafkaconn.ProtocolSASLSSL, SASLMechanism: "SCRAM-SHA-512", SASLUsername: "admin",
				SASLPassword: "secret", TLSCAPEM: string(certPEM)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "orders")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			var hooks counter
			cl, err := kafkaconn.Config{BootstrapServers: c.ListenAddrs(), Security: tc.sec}.NewClient(kgo.WithHooks(&hooks))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			conn := dial(t, cl)
			resp, err := kafkawire.Produce(t.Context(), conn, 5*time.Second, 0, []kafkawire.ProduceTopic{
				{Topic: "orders", Partitions: []kafkawire.ProducePartition{{Partition: 1, Records: batch("v", 5)}}}})
			if err != nil {
				t.Fatal(err)
			}
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("produce: %v", kerr.ErrorForCode(code))
			}
			if got := readValues(t, cl, "orders", 1, 5); !slices.Equal(got, values("v", 5)) {
				t.Fatalf("orders/1 holds %v", got)
			}
			if n := hooks.count(kmsg.Produce.Int16()); n != 1 {
				t.Errorf("the client's hook heard of %d produce requests, want 1", n)
			}
		})
	}
}

// dial opens a connection to the client's first broker.
func dial(t *testing.T, cl *kgo.Client) *kafkawire.Conn {
	t.Helper()
	b := brokersOf(t, cl)
	conn, err := b.Conn(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// brokersOf returns connections to the client's brokers, found from its
// metadata.
func brokersOf(t *testing.T, cl *kgo.Client) *kafkawire.Brokers {
	t.Helper()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	b := kafkawire.NewBrokers(kafkawire.DialerOf(cl), func(id int32) (kgo.BrokerMetadata, bool) {
		for _, br := range meta.Brokers {
			if br.NodeID == id {
				return kgo.BrokerMetadata{NodeID: br.NodeID, Host: br.Host, Port: br.Port}, true
			}
		}
		return kgo.BrokerMetadata{}, false
	})
	t.Cleanup(b.Close)
	return b
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// readValues reads n records of a partition from its start.
func readValues(t *testing.T, cl *kgo.Client, topic string, p int32, n int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}),
		kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.Dialer(cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)))}
	if ms := cl.OptValue(kgo.SASL).([]sasl.Mechanism); len(ms) > 0 {
		opts = append(opts, kgo.SASL(ms...))
	}
	c, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, fs.Errors())
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
