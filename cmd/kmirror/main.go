// Command kmirror is Kafka cluster mirroring as a service.
//
//	kmirror server    run an instance (REST API and workers)
//	kmirror dev       everything on one machine, for trying it out
//	kmirror mirrors   the operator CLI, against the REST API
//	kmirror apply     make the mirrors match a mirrors file (mirrors as code)
//	kmirror export    write the mirrors as a mirrors file
//	kmirror restore   rebuild an empty database from __mirror_state
//	kmirror token     make an API token and its tokens-file line
//	kmirror secrets   make a secret key; re-encrypt the stored source secrets
//	kmirror heartbeats rotate-key   a new key for the instances' heartbeats
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `kmirror: Kafka cluster mirroring as a service.

Usage:
  kmirror server [flags]    run an instance: REST API, leases and workers
  kmirror dev [flags]       Postgres, two Kafka clusters, a demo mirror and the server, on this machine
  kmirror mirrors [flags]   manage mirrors through the REST API (see kmirror mirrors --help)
  kmirror apply -f FILE [--dry-run] [--prune]
                            make the mirrors match a mirrors file (mirrors as code)
  kmirror export [--mirror NAME] [-o FILE]
                            write the mirrors as a mirrors file
  kmirror restore [flags]   rebuild an empty database from the __mirror_state topic
  kmirror token new --name NAME --role viewer|operator|admin
                            make an API token and the line for the server's tokens file
  kmirror secrets new-key | rotate --new-key-file FILE
                            make a key for KMIRROR_SECRET_KEY_FILE; re-encrypt the stored secrets
  kmirror heartbeats rotate-key
                            a new key to sign the instances' heartbeats with
  kmirror health [--path /readyz]
                            exit 0 when this machine's server answers (a container HEALTHCHECK)
  kmirror version

Run 'kmirror COMMAND --help' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "server":
		err = serverCommand(ctx, args[1:], stderr)
	case "dev":
		err = devCommand(ctx, args[1:], stdout, stderr)
	case "restore":
		err = restoreCommand(ctx, args[1:], stdout, stderr)
	case "token":
		err = tokenCommand(args[1:], stdout, stderr)
	case "secrets":
		err = secretsCommand(ctx, args[1:], stdout, stderr)
	case "heartbeats":
		err = heartbeatsCommand(ctx, args[1:], stdout, stderr)
	case "health":
		err = healthCommand(ctx, args[1:], stdout, stderr)
	case "mirrors":
		return mirrorsCommand(ctx, args[1:], stdout, stderr)
	case "apply":
		return applyCommand(ctx, args[1:], stdout, stderr)
	case "export":
		err = exportCommand(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "kmirror", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kmirror: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag set printed the usage
	}
	var bad *usageError
	if errors.As(err, &bad) {
		fmt.Fprintf(stderr, "kmirror %s: %s\nRun 'kmirror %s --help' for usage.\n", args[0], bad.msg, args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "kmirror:", err)
		return 1
	}
	return 0
}
