package procstat

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSelf(t *testing.T) {
	// Burn some CPU so the 10 ms clock moves.
	start := time.Now()
	for x := 0; time.Since(start) < 50*time.Millisecond; x++ {
		_ = x * x
	}
	cpu, err := CPU(Self)
	if err != nil || cpu <= 0 {
		t.Fatalf("CPU(Self) = %s, %v", cpu, err)
	}
	byPid, err := CPU(os.Getpid())
	if err != nil || byPid < cpu {
		t.Fatalf("CPU(pid) = %s, %v; CPU(Self) was %s", byPid, err, cpu)
	}
	m, err := ReadMemory(Self)
	if err != nil || m.RSS <= 0 || m.Peak < m.RSS {
		t.Fatalf("ReadMemory(Self) = %+v, %v", m, err)
	}
	if _, err := CPU(-1); err == nil {
		t.Error("CPU of a pid that cannot exist succeeded")
	}
}

// CommandCPU counts the processes of a name, and the children they reaped:
// here this test binary, and a copy of it that burns CPU and exits.
func TestCommandCPU(t *testing.T) {
	if os.Getenv("PROCSTAT_BURN") != "" {
		burn(100 * time.Millisecond)
		os.Exit(0)
	}
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	comm := strings.TrimSpace(string(self))
	before, n, err := CommandCPU(comm)
	if err != nil || n < 1 {
		t.Fatalf("CommandCPU(%q) = %s, %d processes, %v", comm, before, n, err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestCommandCPU$")
	child.Env = append(os.Environ(), "PROCSTAT_BURN=1")
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	after, _, err := CommandCPU(comm)
	if err != nil {
		t.Fatal(err)
	}
	// The child used at least 100 ms, counted in 10 ms steps.
	if after-before < 80*time.Millisecond {
		t.Errorf("CPU of %q grew by %s over a child that burned 100 ms and was reaped", comm, after-before)
	}
	if _, n, err := CommandCPU("no-such-command-here"); err != nil || n != 0 {
		t.Errorf("CommandCPU of an unknown name: %d processes, %v", n, err)
	}
}

// burn spins until this process has used d of CPU: a wall-clock d is less
// CPU than that on a busy machine (the suite runs packages in parallel).
func burn(d time.Duration) {
	for x := 0; ; x++ {
		_ = x * x
		if x%100_000 == 0 {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= d {
				return
			}
		}
	}
}
