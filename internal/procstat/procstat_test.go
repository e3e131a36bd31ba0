package procstat

import (
	"os"
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
