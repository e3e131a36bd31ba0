// Package procstat reads a Linux process's CPU time and memory from /proc,
// for benchmarks that measure kmirror apart from the processes beside it
// (the kfake clusters of internal/devcluster in their own process). It
// imports nothing of kmirror's.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times. Linux fixes
// it at 100 on every architecture Go runs on (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// Self names the calling process.
const Self = 0

func path(pid int, file string) string {
	if pid == Self {
		return "/proc/self/" + file
	}
	return fmt.Sprintf("/proc/%d/%s", pid, file)
}

// CPU returns the user and system CPU time all threads of the process have
// used so far (fields 14 and 15 of /proc/<pid>/stat), in 10 ms steps.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(path(pid, "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("procstat: unexpected %s", path(pid, "stat"))
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("procstat: short %s", path(pid, "stat"))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("procstat: bad times in %s", path(pid, "stat"))
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// Memory is a process's resident set: now, and its peak so far.
type Memory struct {
	RSS  int64 // VmRSS, bytes
	Peak int64 // VmHWM, bytes
}

// ReadMemory reads VmRSS and VmHWM from /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(path(pid, "status"))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("procstat: bad %s line %q", name, sc.Text())
		}
		if name == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.Peak = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, err
	}
	if m.RSS == 0 {
		return Memory{}, fmt.Errorf("procstat: no VmRSS in %s", path(pid, "status"))
	}
	return m, nil
}
