package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// watchdogScript waits for EOF on stdin, then stops the server and removes
// its directory ($3, if set). Positional args: pg_ctl, data dir, dir to remove.
const watchdogScript = `read _; "$1" stop -D "$2" -m fast -w >/dev/null 2>&1; [ -z "$3" ] || rm -rf "$3"`

// watchdog stops the server if this process dies without calling Stop: a test
// binary killed by -timeout, Ctrl-C or SIGKILL would otherwise leave a
// postmaster running (pg_ctl detaches it) and its directory behind. It holds
// the read end of a pipe whose write end only this process has; the kernel
// closes it however we exit.
type watchdog struct {
	cmd *exec.Cmd
	w   *os.File
}

func startWatchdog(as runAs, pgCtl, dataDir, removeDir string) (*watchdog, error) {
	r, w, err := os.Pipe() // O_CLOEXEC: no other child inherits w
	if err != nil {
		return nil, fmt.Errorf("watchdog pipe: %w", err)
	}
	defer r.Close()
	cmd := as.command(context.Background(), "/", "/bin/sh", "-c", watchdogScript, "sh", pgCtl, dataDir, removeDir)
	cmd.Stdin = r
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Own process group: a terminal's Ctrl-C must kill us, not the watchdog.
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, w: w}, nil
}

// disarm ends the watchdog without letting it act; Stop then does the work
// itself and can report errors.
func (d *watchdog) disarm() {
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.w.Close()
}
