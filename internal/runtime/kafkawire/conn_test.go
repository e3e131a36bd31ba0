package kafkawire_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/runtime/kafkaconn"
	"kmirror/internal/runtime/kafkawire"
)

func newCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(4, "orders")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

func produceOne(t *testing.T, conn *kafkawire.Conn, p int32, prefix string, n int) (*kmsg.ProduceResponse, error) {
	return kafkawire.Produce(t.Context(), conn, 5*time.Second, 0, []kafkawire.ProduceTopic{
		{Topic: "orders", Partitions: []kafkawire.ProducePartition{{Partition: p, Records: batch(prefix, n)}}}})
}

// TestRequestsFromManyGoroutinesShareAConnection: requests written from
// several goroutines at once each get their own answer, and every batch
// lands once.
func TestRequestsFromManyGoroutinesShareAConnection(t *testing.T) {
	t.Parallel()
	_, cl := newCluster(t)
	conn := dial(t, cl)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 25 {
				resp, err := produceOne(t, conn, int32(g), "x", 2)
				if err != nil {
					t.Error(err)
					return
				}
				if got := resp.Topics[0].Partitions[0]; got.Partition != int32(g) || got.ErrorCode != 0 {
					t.Errorf("goroutine %d got the answer for partition %d (error %d)", g, got.Partition, got.ErrorCode)
				}
			}
		})
	}
	wg.Wait()
	for p := range int32(4) {
		if got := readValues(t, cl, "orders", p, 50); len(got) != 50 {
			t.Errorf("orders/%d holds %d records, want 50", p, len(got))
		}
	}
}

// TestBrokenConnectionFailsWhatWaits: a broker that drops the connection
// while requests wait fails them (none hangs), and the next request goes
// on a new connection.
func TestBrokenConnectionFailsWhatWaits(t *testing.T) {
	t.Parallel()
	c, cl := newCluster(t)
	b := brokersOf(t, cl)
	conn, err := b.Conn(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		return nil, errors.New("dropped"), true // kfake closes the connection
	})
	if _, err := produceOne(t, conn, 0, "lost", 1); err == nil {
		t.Fatal("a produce on a dropped connection succeeded")
	}
	if conn.Usable() {
		t.Fatal("the dropped connection is still usable")
	}
	again, err := b.Conn(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if again == conn {
		t.Fatal("Brokers handed out the dropped connection again")
	}
	if resp, err := produceOne(t, again, 0, "kept", 1); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce on the new connection: %v", err)
	}
}

// TestSilentBrokerTimesOut: an answer that does not come within the
// request's timeout fails the request and the connection.
func TestSilentBrokerTimesOut(t *testing.T) {
	t.Parallel()
	c, cl := newCluster(t)
	conn := dial(t, cl)
	release := make(chan struct{})
	defer close(release)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		<-release
		return nil, nil, false
	})
	start := time.Now()
	_, err := kafkawire.Produce(t.Context(), conn, time.Second, 300*time.Millisecond, []kafkawire.ProduceTopic{
		{Topic: "orders", Partitions: []kafkawire.ProducePartition{{Partition: 0, Records: batch("late", 1)}}}})
	if err == nil {
		t.Fatal("a produce the broker never answered succeeded")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("gave up after %s, want about 300ms", took)
	}
	if conn.Usable() {
		t.Fatal("the connection is still usable after a timeout")
	}
}

// TestSilentBrokerHoldsUpNoOther: while a dial to a broker that accepts
// and never answers waits out its timeout, a connection to another broker
// of the cluster is still had at once.
func TestSilentBrokerHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	c, cl := newCluster(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, never answered
		}
	}()
	real := c.ListenAddrs()[0]
	b := kafkawire.NewBrokers(kafkawire.DialerOf(cl), func(id int32) (kgo.BrokerMetadata, bool) {
		addr := real
		if id == 1 {
			addr = silent.Addr().String()
		}
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		return kgo.BrokerMetadata{NodeID: id, Host: host, Port: int32(p)}, true
	})
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	dialing := make(chan error, 1)
	go func() {
		_, err := b.Conn(ctx, 1)
		dialing <- err
	}()
	time.Sleep(100 * time.Millisecond) // the silent dial is under way
	start := time.Now()
	if _, err := b.Conn(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the answering broker's connection took %s behind the silent one's dial", took)
	}
	if err := <-dialing; err == nil {
		t.Fatal("a broker that never answered was connected")
	}
}

// TestSASLSessionIsRenewedBeforeItEnds: a broker that ends SASL sessions
// (connections.max.reauth.ms, KIP-368) gets a new, authenticated
// connection before this one's session is due; the old one closes once
// its requests are answered.
func TestSASLSessionIsRenewedBeforeItEnds(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "secret"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "400"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kafkaconn.Config{BootstrapServers: c.ListenAddrs(), Security: kafkaconn.Security{
		Protocol: kafkaconn.ProtocolSASLPlaintext, SASLMechanism: "SCRAM-SHA-256", SASLUsername: "admin", SASLPassword: "secret",
	}}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b := brokersOf(t, cl)
	first, err := b.Conn(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produceOne(t, first, 0, "a", 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * 9 / 10 * time.Millisecond)
	second, err := b.Conn(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("the connection was kept past 90% of its SASL session")
	}
	if resp, err := produceOne(t, second, 0, "b", 1); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce on the renewed connection: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for first.Usable() || !closed(first) {
		if time.Now().After(deadline) {
			t.Fatal("the old connection was not closed after its requests were answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closed reports whether a connection takes no more requests at all.
func closed(c *kafkawire.Conn) bool {
	_, err := c.Do(context.Background(), kafkawire.Request{Key: kmsg.ApiVersions.Int16(), Body: net.Buffers{kmsg.NewPtrApiVersionsRequest().AppendTo(nil)}})
	return err != nil
}
