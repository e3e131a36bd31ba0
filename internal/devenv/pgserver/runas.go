package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// runAs is the OS identity the server runs under. PostgreSQL refuses to run
// as root, so root hands the server to the "postgres" user; anyone else runs
// it as themselves (cred nil).
type runAs struct {
	cred *syscall.Credential
}

func currentRunAs() (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return runAs{}, fmt.Errorf("running as root, and PostgreSQL refuses root: "+
			"need a \"postgres\" OS user to run it as (useradd --system postgres): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("parse uid of postgres user: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("parse gid of postgres user: %w", err)
	}
	return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// chown gives path to the server's user; a no-op when not root.
func (r runAs) chown(path string) error {
	if r.cred == nil {
		return nil
	}
	return os.Chown(path, int(r.cred.Uid), int(r.cred.Gid))
}

// command builds a command run as the server's user. dir is its working
// directory: the postgres user may not be able to enter ours (e.g. /root).
func (r runAs) command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if r.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	}
	return cmd
}
