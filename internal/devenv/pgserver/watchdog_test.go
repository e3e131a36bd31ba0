package pgserver

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestWatchdog kills a process that started a server without stopping it,
// and expects the server gone and its directory removed.
func TestWatchdog(t *testing.T) {
	if os.Getenv("PGSERVER_WATCHDOG_HELPER") == "1" {
		s, err := Start(t.Context(), Config{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(s.port, s.baseDir)
		select {} // wait to be killed
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdog$")
	cmd.Env = append(os.Environ(), "PGSERVER_WATCHDOG_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var port int
	var dir string
	line, _ := bufio.NewReader(out).ReadString('\n')
	if _, err := fmt.Sscan(line, &port, &dir); err != nil {
		cmd.Process.Kill()
		t.Fatalf("helper said %q: %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(30 * time.Second)
	for {
		c, dialErr := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if dialErr == nil {
			c.Close()
		}
		_, statErr := os.Stat(dir)
		if dialErr != nil && os.IsNotExist(statErr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the owner died: port %d open=%v, dir %s: %v", port, dialErr == nil, dir, statErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
