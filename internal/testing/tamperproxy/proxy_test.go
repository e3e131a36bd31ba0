package tamperproxy_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/testing/tamperproxy"
)

// TestProxyKeepsClientsBehindIt: a client of a three-broker cluster
// through the proxy learns only the proxy's addresses, produces and
// fetches through it, and a fetch answer the test changes arrives changed.
func TestProxyKeepsClientsBehindIt(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Fetch answers are parsed and written again, as a test that changes
	// them has them.
	p := tamperproxy.New(t, c.ListenAddrs()[0], func(*kmsg.FetchResponse) tamperproxy.Fault { return tamperproxy.Forward })
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.ConsumeTopics("t"), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 {
		t.Fatalf("%d brokers, want 3", len(md.Brokers))
	}
	for _, b := range md.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if slices.Contains(c.ListenAddrs(), addr) {
			t.Fatalf("broker %d is advertised at the cluster's own address %s", b.NodeID, addr)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got == 0; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal("no record fetched through the proxy")
		}
		got = fs.NumRecords()
	}
	if p.Requests(kmsg.Metadata) == 0 || p.Requests(kmsg.Fetch) == 0 || p.Requests(kmsg.Produce) == 0 {
		t.Fatalf("metadata %d, fetch %d, produce %d requests through the proxy", p.Requests(kmsg.Metadata),
			p.Requests(kmsg.Fetch), p.Requests(kmsg.Produce))
	}
}
