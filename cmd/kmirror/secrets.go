package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"kmirror/internal/runtime/secretbox"
)

const secretsUsage = `usage:
  kmirror secrets new-key                      print a fresh key for KMIRROR_SECRET_KEY_FILE
  kmirror secrets rotate --new-key-file FILE   re-encrypt every stored source secret under FILE's (first) key

A key file holds one key a line: the first seals, each one opens. Servers read
KMIRROR_SECRET_KEY_FILE again on SIGHUP and when it changes (checked every 5 s),
so a rotation needs no restart. With no moment where a server cannot open a secret:
  kmirror secrets new-key > new.key
  cat new.key "$KMIRROR_SECRET_KEY_FILE" > both.key   # the new key first: it seals
  mv both.key "$KMIRROR_SECRET_KEY_FILE"              # on every server; wait for "secret key file reloaded"
  kmirror secrets rotate --new-key-file new.key       # KMIRROR_SECRET_KEY_FILE opens, new.key seals
  cp new.key "$KMIRROR_SECRET_KEY_FILE"               # then drop the old key
Rotating first and writing the new key afterwards also works, but until a
server has read it, requests that need a secret get 503 secret-key-unavailable
and its workers retry.`

// secretsCommand is `kmirror secrets new-key` and `kmirror secrets rotate`.
func secretsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, secretsUsage)
		return errors.New("missing secrets command")
	}
	switch args[0] {
	case "new-key":
		key, err := secretbox.NewKeyText()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, key)
		return nil
	case "rotate":
		return secretsRotate(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, secretsUsage)
	return fmt.Errorf("unknown secrets command %q", args[0])
}

// secretsRotate re-encrypts every stored secret in one transaction: the
// current keys (KMIRROR_SECRET_KEY_FILE; none when the secrets are still in
// clear) open them, the new file's first key seals them. Servers that do
// not yet hold the new key answer 503 for those mirrors until they read
// their key file again (SIGHUP, or within 5 s of it changing).
func secretsRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror secrets rotate", flag.ContinueOnError)
	dbURL := fs.String("database-url", os.Getenv("KMIRROR_DATABASE_URL"), "Postgres URL (KMIRROR_DATABASE_URL)")
	oldKey := fs.String("secret-key-file", os.Getenv("KMIRROR_SECRET_KEY_FILE"), "the current key, which opens the stored secrets; empty when they are stored in clear (KMIRROR_SECRET_KEY_FILE)")
	newKey := fs.String("new-key-file", "", "the new key (required); the same file as --secret-key-file encrypts secrets stored in clear")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *dbURL == "" || *newKey == "" {
		return errors.New("--database-url (KMIRROR_DATABASE_URL) and --new-key-file are required")
	}
	next, err := secretbox.LoadKeyFile(*newKey)
	if err != nil {
		return fmt.Errorf("--new-key-file: %w", err)
	}
	var current *secretbox.Keyring
	if *oldKey != "" {
		if current, err = secretbox.LoadKeyFile(*oldKey); err != nil {
			return fmt.Errorf("--secret-key-file: %w", err)
		}
	}
	svc, closeDB, err := offlineControl(ctx, *dbURL, true, current)
	if err != nil {
		return err
	}
	defer closeDB()
	n, err := svc.RotateSecrets(ctx, next)
	if err != nil {
		return fmt.Errorf("nothing was changed: %w", err)
	}
	fmt.Fprintf(stdout, "Re-encrypted %d secret(s) under key %s. Every kmirror server's KMIRROR_SECRET_KEY_FILE must now hold it "+
		"(the contents of %s): servers read the file again within 5 s of a change, or at once on SIGHUP.\n", n, next.ID(), *newKey)
	return nil
}
