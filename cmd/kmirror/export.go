package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"kmirror/openapi/mirrorsfile"
)

const exportUsage = `Usage: kmirror export [--mirror NAME] [-o FILE] [--server URL]

Writes the deployment's mirrors as a mirrors file (docs/mirrors-as-code.md),
which kmirror apply takes: each mirror's source and config keys, and its
topics by exact name with their state (mirroring, paused or stopped).
Applied as it is, it changes nothing. The API never returns secrets: each
secret the server has is written as {env: KMIRROR_<MIRROR>_<FIELD>}, with a
comment, for you to set or point at a file.

Flags:
`

// exportCommand runs `kmirror export`.
func exportCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror export", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), exportUsage)
		fs.PrintDefaults()
	}
	mirror := fs.String("mirror", "", "export only this mirror")
	out := fs.String("o", "", "write to FILE instead of standard output")
	server := fs.String("server", cmp.Or(os.Getenv("KMIRROR_SERVER"), "http://127.0.0.1:8080"), "kmirror REST API base URL (KMIRROR_SERVER)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	cli, err := newMirrorsCLI(&mirrorsOptions{server: *server}, stdout, stderr)
	if err != nil {
		return err
	}
	f, err := mirrorsfile.Export(ctx, cli.api, mirrorsfile.ExportOpts{Mirror: *mirror})
	if err != nil {
		return cli.apiError(err)
	}
	b, err := f.Marshal()
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}
