// Package procstat reads a Linux process's CPU time and memory from /proc,
// for benchmarks that measure kmirror apart from the processes beside it
// (the kfake clusters of internal/devenv/devcluster in their own process). It
// imports nothing of kmirror's.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
	_, ticks, err := parseStat(b, false)
	if err != nil {
		return 0, fmt.Errorf("procstat: %s: %w", path(pid, "stat"), err)
	}
	return ticks, nil
}

// CommandCPU returns the CPU time of every process whose command name is
// comm, with the time of the children they have reaped: for a server that
// forks a process per connection (PostgreSQL), the exited ones count. n is
// how many processes were found; none is not an error.
func CommandCPU(comm string) (cpu time.Duration, n int, err error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, 0, err
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		name, t, err := parseStat(b, true)
		if err != nil || name != comm {
			continue
		}
		cpu += t
		n++
	}
	return cpu, n, nil
}

// parseStat reads the command name and the CPU time from a stat file,
// with the reaped children's time (fields 16 and 17) if children is set.
func parseStat(b []byte, children bool) (comm string, cpu time.Duration, err error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields are counted from the last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("unexpected format")
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 {
		return "", 0, fmt.Errorf("short")
	}
	fields := f[11:13] // utime, stime: fields 14 and 15
	if children {
		fields = f[11:15] // and cutime, cstime
	}
	var ticks int64
	for _, v := range fields {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("bad times")
		}
		ticks += n
	}
	return string(b[open+1 : end]), time.Duration(ticks) * time.Second / clockTicks, nil
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
