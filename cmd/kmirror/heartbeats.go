package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"kmirror/service"
)

const heartbeatsUsage = `usage:
  kmirror heartbeats rotate-key   add a new heartbeat key; it signs a minute later

Instances sign their heartbeats on the destination's __mirror_heartbeats with a
key only the database holds, so that a client that can write that topic cannot
speak for an instance. Rotate it when the database (or a dump of it) may have
been read by someone else. Servers read the keys every 5 s and need no restart;
heartbeats signed by the previous key verify until it is deleted, ten minutes
after the new one signs, at the next rotation.`

// heartbeatsCommand is `kmirror heartbeats rotate-key`.
func heartbeatsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "rotate-key" {
		fmt.Fprintln(stderr, heartbeatsUsage)
		if len(args) == 0 {
			return errors.New("missing heartbeats command")
		}
		return fmt.Errorf("unknown heartbeats command %q", args[0])
	}
	fs := flag.NewFlagSet("kmirror heartbeats rotate-key", flag.ContinueOnError)
	dbURL := fs.String("database-url", os.Getenv("KMIRROR_DATABASE_URL"), "Postgres URL (KMIRROR_DATABASE_URL)")
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("--database-url (KMIRROR_DATABASE_URL) is required")
	}
	svc, closeDB, err := offlineControl(ctx, *dbURL, true, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	rot, err := svc.RotateHeartbeatKey(ctx)
	if err != nil {
		return fmt.Errorf("nothing was changed: %w", err)
	}
	fmt.Fprintf(stdout, "Added heartbeat key %d. Servers read it within 5 s and sign with it in %s; "+
		"heartbeats signed by the previous key verify until its deletion, at a rotation at least %s later.\n",
		rot.ID, rot.SignsIn, service.HeartbeatKeyRetire+rot.SignsIn)
	return nil
}
