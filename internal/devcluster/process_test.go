package devcluster

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
