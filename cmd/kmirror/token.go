package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"kmirror/api"
)

// tokenCommand is `kmirror token new --name NAME --role ROLE`: it prints a
// fresh token, for the client, and its tokens-file line, for the server.
// Only the line's hash is ever stored.
func tokenCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		fmt.Fprintln(stderr, "usage: kmirror token new --name NAME --role viewer|operator|admin")
		return errors.New("unknown or missing token command; only \"new\" exists")
	}
	fs := flag.NewFlagSet("kmirror token new", flag.ContinueOnError)
	name := fs.String("name", "", "the token's name: the actor the audit trail records (required)")
	role := fs.String("role", "viewer", "viewer (reads), operator (also topic actions and sync) or admin (also creates, changes and deletes mirrors)")
	if err := parseFlags(fs, args[1:], stderr); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("--name is required")
	}
	token, line, err := api.NewToken(*name, api.Role(*role))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `Token (give it to the client; it is not stored anywhere and cannot be shown again):
  %s

Line for the server's tokens file (--api-tokens-file, KMIRROR_API_TOKENS_FILE):
  %s
`, token, line)
	return nil
}
