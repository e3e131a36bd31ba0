package devcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"kmirror/internal/devenv/procstat"
)

// processEnv marks a child started for Config.Process; its value is the
// child's Config (childConfig).
const processEnv = "KMIRROR_DEVCLUSTER_PROCESS"

// processStartTimeout bounds the wait for the child's addresses, and
// processStopTimeout the wait for it to exit once its stdin closes.
const (
	processStartTimeout = 30 * time.Second
	processStopTimeout  = 10 * time.Second
)

// ServeIfChild makes a test binary able to run its clusters in a child
// process (Config.Process). In the child it starts both clusters, prints
// their addresses on stdout, and exits when stdin closes, that is when the
// parent calls Close or dies; anywhere else it returns at once. A package
// whose tests or benchmarks use Config.Process calls it first in TestMain:
//
//	func TestMain(m *testing.M) {
//		devcluster.ServeIfChild()
//		os.Exit(testdb.Main(m))
//	}
func ServeIfChild() {
	if os.Getenv(processEnv) == "" {
		return
	}
	os.Exit(serveChild(os.Getenv(processEnv), os.Stdin, os.Stdout))
}

func serveChild(env string, stdin io.Reader, stdout io.Writer) int {
	cfg, err := parseChildConfig(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	if _, err := fmt.Fprintf(stdout, "%s %s\n", c.SourceAddr(), c.DestinationAddr()); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, stdin) // until the parent closes it or dies
	return 0
}

// childConfig is the part of cfg the child takes, as processEnv's value:
// "brokers=N" and "blackhole" separated by commas, or "default".
func childConfig(cfg Config) string {
	var parts []string
	if cfg.SourceBrokers > 1 {
		parts = append(parts, "brokers="+strconv.Itoa(cfg.SourceBrokers))
	}
	if cfg.BlackholeDestination {
		parts = append(parts, "blackhole")
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ",")
}

func parseChildConfig(s string) (Config, error) {
	var cfg Config
	for _, part := range strings.Split(s, ",") {
		n, found := strings.CutPrefix(part, "brokers=")
		switch {
		case part == "default":
		case part == "blackhole":
			cfg.BlackholeDestination = true
		case found:
			var err error
			if cfg.SourceBrokers, err = strconv.Atoi(n); err != nil {
				return Config{}, fmt.Errorf("devcluster: %s=%q: %w", processEnv, s, err)
			}
		default:
			return Config{}, fmt.Errorf("devcluster: %s=%q: unknown %q", processEnv, s, part)
		}
	}
	return cfg, nil
}

// Process is the child process behind clusters started with
// Config.Process: its CPU and memory are the brokers' alone.
type Process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{} // closed when cmd.Wait returned
	once   sync.Once
}

// startProcess re-executes this (test) binary as the clusters' child.
func startProcess(cfg Config) (*Clusters, error) {
	if cfg.SourcePort != 0 || cfg.DestinationPort != 0 || cfg.DataDir != "" ||
		len(cfg.SourceOpts) > 0 || len(cfg.DestinationOpts) > 0 {
		return nil, errors.New("devcluster: Process takes no ports, data directory or kfake options")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("devcluster: find this binary to re-execute: %w", err)
	}
	// The flags make a test binary without ServeIfChild run nothing and
	// exit, which the parent reports, instead of running its tests again.
	cmd := exec.Command(exe, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), processEnv+"="+childConfig(cfg))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devcluster: start the clusters' process: %w", err)
	}
	p := &Process{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		got <- result{line, err}
	}()
	var r result
	select {
	case r = <-got:
	case <-time.After(processStartTimeout):
		r.err = fmt.Errorf("no addresses after %s", processStartTimeout)
	}
	addrs := strings.Fields(r.line)
	if r.err != nil || len(addrs) != 2 {
		p.close()
		return nil, fmt.Errorf("devcluster: the clusters' process (%s) gave no addresses (%v); does its TestMain call devcluster.ServeIfChild?",
			exe, r.err)
	}
	ports := map[string]int{}
	for i, role := range []string{"source", "destination"} {
		_, port, err := net.SplitHostPort(addrs[i])
		n, err2 := strconv.Atoi(port)
		if err != nil || err2 != nil {
			p.close()
			return nil, fmt.Errorf("devcluster: the clusters' process printed %q", r.line)
		}
		ports[role] = n
	}
	return newClusters(cfg, nil, nil, ports, p), nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// CPU is the CPU time the child has used so far.
func (p *Process) CPU() (time.Duration, error) { return procstat.CPU(p.Pid()) }

// Memory is the child's resident set, now and at its peak.
func (p *Process) Memory() (procstat.Memory, error) { return procstat.ReadMemory(p.Pid()) }

// close ends the child: its stdin closes, and it is killed if it has not
// exited within processStopTimeout.
func (p *Process) close() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(processStopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}
