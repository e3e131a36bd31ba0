package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"

	"kmirror/openapi/mirrorsfile"
)

const applyUsage = `Usage: kmirror apply -f FILE [--dry-run [--exit-code]] [--prune] [--update-secrets]
                     [--restart-stopped] [--skip-checks] [--server URL]

Makes the deployment's mirrors match a mirrors file (docs/mirrors-as-code.md):
creates and updates mirrors, adds, resumes and pauses their topics, and
removes the topics the file marks state: stopped (a failover). It prints
the plan first, then each step as it is made. Through the REST API at
--server (else KMIRROR_SERVER, else http://127.0.0.1:8080), with the token
in KMIRROR_TOKEN (or KMIRROR_API_TOKEN), as kmirror mirrors.

Mirrors and topics the file does not name are left alone and listed,
unless --prune: then the topics are removed (failover) and the mirrors
deleted. A stopped topic the file wants mirrored is restarted only with
--restart-stopped, since a restart copies again (a failback).

Secrets are never in the file: each is {env: NAME} or {file: PATH}. The API
never returns them, so they cannot be compared: one is sent when a mirror is
created, when the server does not have it, with any other change to the same
source, and with --update-secrets always.

Exit status: 0 done, or no changes; 1 a bad file, refused by the server or
not reachable; 2 bad usage; 3 --dry-run --exit-code and the plan has
changes.

Flags:
`

// applyCommand runs `kmirror apply` and returns the exit status.
func applyCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror apply", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), applyUsage)
		fs.PrintDefaults()
	}
	file := fs.String("f", "", "the mirrors file (YAML, apiVersion kmirror/v1)")
	server := fs.String("server", cmp.Or(os.Getenv("KMIRROR_SERVER"), "http://127.0.0.1:8080"), "kmirror REST API base URL (KMIRROR_SERVER)")
	dryRun := fs.Bool("dry-run", false, "print the plan and change nothing")
	exitCode := fs.Bool("exit-code", false, "with --dry-run: exit 3 when the plan has changes")
	var opts mirrorsfile.Opts
	fs.BoolVar(&opts.Prune, "prune", false, "delete the mirrors the file does not name, and remove (fail over) the topics no entry matches")
	fs.BoolVar(&opts.UpdateSecrets, "update-secrets", false, "send every secret of the file to existing mirrors, although unchanged ones cannot be told apart")
	fs.BoolVar(&opts.RestartStopped, "restart-stopped", false, "restart stopped topics the file wants mirroring or paused (a failback: it copies again)")
	fs.BoolVar(&opts.SkipChecks, "skip-checks", false, "add topics even if the preflight checks of the clusters fail")
	code, err := runApply(ctx, fs, args, stdout, stderr, file, server, dryRun, exitCode, &opts)
	return commandExit(stderr, "apply", code, err)
}

func runApply(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer, file, server *string,
	dryRun, exitCode *bool, opts *mirrorsfile.Opts) (int, error) {
	if err := parseFlags(fs, args, stdout); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, usagef("unexpected argument %q", fs.Arg(0))
	}
	if *file == "" {
		return 0, usagef("-f FILE is required")
	}
	if *exitCode && !*dryRun {
		return 0, usagef("--exit-code goes with --dry-run")
	}
	f, err := mirrorsfile.Load(*file)
	if err != nil {
		return 0, err
	}
	cli, err := newMirrorsCLI(&mirrorsOptions{server: *server}, stdout, stderr)
	if err != nil {
		return 0, err
	}
	plan, err := mirrorsfile.NewPlan(ctx, cli.api, f, *opts)
	if err != nil {
		return 0, cli.apiError(err)
	}
	plan.Write(stdout, *file)
	switch {
	case !plan.Changes():
		return 0, nil
	case *dryRun:
		fmt.Fprintln(stdout, "Nothing was changed (dry run).")
		if *exitCode {
			return 3, nil
		}
		return 0, nil
	}
	n := 0
	err = mirrorsfile.Apply(ctx, cli.api, plan, mirrorsfile.ApplyOpts{OnStep: func(s mirrorsfile.Step) {
		n++
		fmt.Fprintf(stdout, "Done: %s\n", s.Describe())
	}})
	if err != nil {
		return 0, fmt.Errorf("%w (%d step(s) were made before it)", cli.apiError(err), n)
	}
	fmt.Fprintf(stdout, "Applied %s: %d step(s).\n", *file, n)
	return 0, nil
}

// apiError adds the CLI's hints to an error of the mirrorsfile package:
// which token a 401 refused, and the server when it is not reachable.
func (c *mirrorsCLI) apiError(err error) error {
	var pe *mirrorsfile.ProblemError
	if errors.As(err, &pe) {
		if pe.Status == 401 {
			return fmt.Errorf("%w; %s", err, c.tokenHint())
		}
		return err
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return c.transportError(urlErr)
	}
	return err
}

// commandExit prints a command's error and returns its exit status: 2 for
// bad usage, 1 for any other error, else code.
func commandExit(stderr io.Writer, name string, code int, err error) int {
	var bad *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "kmirror %s: %s\nRun 'kmirror %s --help' for usage.\n", name, bad.msg, name)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return code
}
