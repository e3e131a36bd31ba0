package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"kmirror/service"
	"kmirror/workers/statetopic"
)

// restoreCommand rebuilds an empty database from __mirror_state, or with
// --verify compares a restored database with it.
//
// Restore writes everything in one transaction after __mirror_state has
// been read whole: if the destination cluster goes away it fails before
// writing anything (within --timeout), and if Postgres goes away the
// transaction rolls back and the database stays empty. Either way it can
// simply be run again.
func restoreCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror restore", flag.ContinueOnError)
	dbURL := fs.String("database-url", os.Getenv("KMIRROR_DATABASE_URL"), "Postgres URL of an empty database (KMIRROR_DATABASE_URL)")
	dest := fs.String("destination-bootstrap", os.Getenv("KMIRROR_DESTINATION_BOOTSTRAP"), "destination cluster holding __mirror_state (KMIRROR_DESTINATION_BOOTSTRAP)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long reading __mirror_state (and, with --verify, the destination's end offsets) may take")
	verify := fs.Bool("verify", false, "write nothing: compare a restored database with __mirror_state and the destination, print a report, and exit 1 on any difference (run it before starting servers)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *dbURL == "" || *dest == "" {
		return fmt.Errorf("--database-url and --destination-bootstrap are required")
	}
	destination, err := destinationFromEnv(*dest)
	if err != nil {
		return err
	}
	svc, closeDB, err := offlineControl(ctx, *dbURL, !*verify, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	readCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	latest, err := statetopic.ReadState(readCtx, destination)
	if err != nil {
		return err
	}
	if *verify {
		snap, err := service.DecodeState(latest)
		if err != nil {
			return err
		}
		ends, err := statetopic.DestinationEnds(readCtx, destination, snap)
		if err != nil {
			return err
		}
		rep, err := svc.VerifyRestore(ctx, snap, ends)
		if err != nil {
			return err
		}
		for _, l := range rep.Lines {
			fmt.Fprintln(stdout, l)
		}
		if len(rep.Differences) > 0 {
			fmt.Fprintln(stdout, "Differences:")
			for _, d := range rep.Differences {
				fmt.Fprintln(stdout, "  "+d)
			}
			return fmt.Errorf("restore verification found %d difference(s)", len(rep.Differences))
		}
		fmt.Fprintf(stdout, "The database agrees with %s.\n", service.StateTopic)
		return nil
	}
	res, err := svc.Restore(ctx, latest)
	var conflict *service.ConflictError
	if errors.As(err, &conflict) {
		return fmt.Errorf("%s (to check an earlier restore, use --verify)", conflict.Detail)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Restored %d mirror(s), %d topic(s), %d partition state(s), %d offset-map run(s) of %d partition(s) and %d synced ACL(s) from %s.\n",
		res.Mirrors, res.Topics, res.Partitions, res.OffsetRuns, res.OffsetMapPartitions, res.SyncedACLs, service.StateTopic)
	if len(res.Lowered) > 0 {
		fmt.Fprintf(stdout, "%d checkpoint(s) moved back to the end of their offset map; PREPARING re-checks the rest against the source: %s\n",
			len(res.Lowered), strings.Join(res.Lowered, ", "))
	}
	if len(res.NeedCredentials) > 0 {
		fmt.Fprintln(stdout, "Source secrets are never published. These mirrors are needs_credentials and do not run until they are set again:")
		for _, m := range res.NeedCredentials {
			fmt.Fprintf(stdout, "  %s: %s\n", m.Mirror, strings.Join(m.Missing, ", "))
		}
		fmt.Fprintln(stdout, "  (PATCH /v1/mirrors/NAME with {\"source\": {\"sasl_password\": \"...\", \"tls_key_pem\": \"...\"}})")
	}
	fmt.Fprintln(stdout, "Start kmirror server: each partition re-aligns in PREPARING before it mirrors again.")
	return nil
}
