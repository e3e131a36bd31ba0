package devcluster

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) {
	ServeIfChild()
	os.Exit(m.Run())
}

// TestProcessClusters: Config.Process runs both clusters in a child that
// answers over the network, reports its own CPU and memory, and is gone
// after Close.
func TestProcessClusters(t *testing.T) {
	c, err := Start(Config{Process: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if c.Source != nil || c.Destination != nil || c.Process() == nil {
		t.Fatal("want network-only clusters with a process")
	}
	if c.Process().Pid() == os.Getpid() {
		t.Fatal("the clusters run in this process")
	}
	for _, addr := range []string{c.SourceAddr(), c.DestinationAddr()} {
		adm := kadm.NewClient(newClient(t, addr))
		if _, err := adm.CreateTopic(t.Context(), 3, 1, nil, "t"); err != nil {
			t.Fatalf("create a topic on %s: %v", addr, err)
		}
		ends, err := adm.ListEndOffsets(t.Context(), "t")
		if err != nil || len(ends["t"]) != 3 {
			t.Fatalf("end offsets on %s: %v %v", addr, ends, err)
		}
	}
	if _, err := c.Process().CPU(); err != nil {
		t.Errorf("CPU: %v", err)
	}
	if m, err := c.Process().Memory(); err != nil || m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("Memory: %+v, %v", m, err)
	}
	if err := c.Down("source"); !errors.Is(err, errProcess) {
		t.Errorf("Down: %v, want errProcess", err)
	}
	if err := c.StartDemo(t.Context(), Demo{}); !errors.Is(err, errProcess) {
		t.Errorf("StartDemo: %v, want errProcess", err)
	}

	proc := c.Process()
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(processStopTimeout + 5*time.Second):
		t.Fatal("Close hung")
	}
	select {
	case <-proc.exited:
	default:
		t.Fatal("the child is still running after Close")
	}
	if proc.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("the child exited with %v", proc.cmd.ProcessState)
	}
}

func TestProcessRefusesOptions(t *testing.T) {
	if _, err := Start(Config{Process: true, SourcePort: 1234}); err == nil {
		t.Fatal("Process with a port started")
	}
}

// TestProcessClustersTakeBrokersAndBlackhole: SourceBrokers and
// BlackholeDestination reach the child: the source has that many brokers,
// and the destination counts what is produced but keeps none of it.
func TestProcessClustersTakeBrokersAndBlackhole(t *testing.T) {
	c, err := Start(Config{Process: true, SourceBrokers: 3, BlackholeDestination: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers, err := kadm.NewClient(newClient(t, c.SourceAddr())).ListBrokers(t.Context())
	if err != nil || len(brokers) != 3 {
		t.Fatalf("source brokers: %v %v, want 3", brokers, err)
	}
	brokers, err = kadm.NewClient(newClient(t, c.DestinationAddr())).ListBrokers(t.Context())
	if err != nil || len(brokers) != 1 {
		t.Fatalf("destination brokers: %v %v, want 1", brokers, err)
	}

	cl := newClient(t, c.DestinationAddr(), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), "t")
	if o, _ := ends.Lookup("t", 0); err != nil || o.Offset != 3 {
		t.Fatalf("destination end offset %+v %v, want 3", o, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if n := cl.PollFetches(ctx).NumRecords(); n != 0 {
		t.Fatalf("the blackholed destination served %d records", n)
	}
}

// TestChildConfigRoundTrips: what the parent writes, the child reads back;
// anything else is refused.
func TestChildConfigRoundTrips(t *testing.T) {
	for _, cfg := range []Config{{}, {SourceBrokers: 3}, {BlackholeDestination: true}, {SourceBrokers: 2, BlackholeDestination: true}} {
		got, err := parseChildConfig(childConfig(cfg))
		if err != nil || got.SourceBrokers != cfg.SourceBrokers || got.BlackholeDestination != cfg.BlackholeDestination {
			t.Errorf("%+v came back as %+v (%v)", cfg, got, err)
		}
	}
	for _, bad := range []string{"", "brokers=x", "blackhole,tls"} {
		if _, err := parseChildConfig(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
