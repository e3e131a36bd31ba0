package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"kmirror/migrations"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/statetopic"
)

// restoreCommand rebuilds an empty database from __mirror_state.
func restoreCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("database-url", os.Getenv("KMIRROR_DATABASE_URL"), "Postgres URL of an empty database (KMIRROR_DATABASE_URL)")
	dest := fs.String("destination-bootstrap", os.Getenv("KMIRROR_DESTINATION_BOOTSTRAP"), "destination cluster holding __mirror_state (KMIRROR_DESTINATION_BOOTSTRAP)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long reading __mirror_state may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" || *dest == "" {
		return fmt.Errorf("--database-url and --destination-bootstrap are required")
	}
	destination, err := destinationFromEnv(*dest)
	if err != nil {
		return err
	}
	if err := migrations.Up(*dbURL); err != nil {
		return err
	}
	pool, err := repo.Open(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	svc, err := service.New(service.Config{Pool: pool, Catalog: service.KafkaCatalog(5 * time.Second)})
	if err != nil {
		return err
	}
	readCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	latest, err := statetopic.ReadState(readCtx, destination)
	if err != nil {
		return err
	}
	res, err := svc.Restore(ctx, latest)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Restored %d mirror(s), %d topic(s) and %d partition state(s) from %s.\n",
		res.Mirrors, res.Topics, res.Partitions, service.StateTopic)
	if len(res.NeedSecrets) > 0 {
		fmt.Fprintf(stdout, "Source secrets are never published; set them again for: %s\n"+
			"  (PATCH /v1/mirrors/NAME with {\"source\": {\"sasl_password\": ...}})\n", strings.Join(res.NeedSecrets, ", "))
	}
	fmt.Fprintln(stdout, "Start kmirror server: each partition re-aligns in PREPARING before it mirrors again.")
	return nil
}
