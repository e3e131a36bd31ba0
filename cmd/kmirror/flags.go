package main

import (
	"errors"
	"flag"
	"io"
	"slices"
)

// parseFlags parses a command's flags. Asked for help (-h, -help or
// --help), the flag set prints its whole usage to help. Any other mistake
// prints nothing here: it comes back as a usage error, which run prints as
// one line and how to see the help (exit status 2), so the mistake is not
// lost above a hundred lines of flags.
func parseFlags(fs *flag.FlagSet, args []string, help io.Writer) error {
	fs.SetOutput(io.Discard)
	if helpAsked(args) {
		fs.SetOutput(help)
	}
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usagef("%v", err)
}

// helpAsked says whether args ask for help before any "--".
func helpAsked(args []string) bool {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
}
