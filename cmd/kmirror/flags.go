package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseFlags parses a command's flags. Asked for help (-h, -help or
// --help), the flag set prints its whole usage to help. Any other mistake
// prints nothing here: it comes back as a usage error, which run prints as
// one line and how to see the help (exit status 2), so the mistake is not
// lost above a hundred lines of flags. The line says what was probably
// meant where it can tell: the flag a mistyped one is closest to, and the
// unit a number given as a duration lacks.
func parseFlags(fs *flag.FlagSet, args []string, help io.Writer) error {
	fs.SetOutput(io.Discard)
	if helpAsked(args) {
		fs.SetOutput(help)
	}
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usagef("%v%s", err, flagHint(fs, err))
}

// The flag package's messages for an unknown flag and a bad value: its
// wording is part of Go's compatibility promise only in practice, so a
// message that no longer matches simply gets no hint.
var (
	unknownFlagRE = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	badValueRE    = regexp.MustCompile(`^invalid value "(.*)" for flag -(\S+): `)
)

// flagHint is what parseFlags adds to a flag error: "; did you mean
// --wait?" for a flag that is one or two edits from a defined one, or
// "; add a unit, as in 10s" for a duration given as a bare number.
func flagHint(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := unknownFlagRE.FindStringSubmatch(msg); m != nil {
		if name := closestFlag(fs, m[1]); name != "" {
			return fmt.Sprintf("; did you mean --%s?", name)
		}
		return ""
	}
	if m := badValueRE.FindStringSubmatch(msg); m != nil {
		f := fs.Lookup(m[2])
		if f == nil {
			return ""
		}
		if g, ok := f.Value.(flag.Getter); !ok {
			return ""
		} else if _, isDuration := g.Get().(time.Duration); !isDuration {
			return ""
		}
		if _, err := strconv.ParseFloat(m[1], 64); err == nil {
			return fmt.Sprintf("; a duration needs a unit, as in --%s %ss", m[2], m[1])
		}
	}
	return ""
}

// closestFlag is the defined flag name most likely meant: the nearest one
// at most two edits away (one for a name of up to five letters), a swap
// of two neighbours counting as one edit; else the only one that name
// begins (--source for --source-bootstrap); else "".
func closestFlag(fs *flag.FlagSet, name string) string {
	name = strings.ToLower(name)
	best, bestDist := "", 3
	if len(name) <= 5 {
		bestDist = 2
	}
	var prefixed []string
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			prefixed = append(prefixed, f.Name)
		}
	})
	if best == "" && len(prefixed) == 1 {
		best = prefixed[0]
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// helpAsked says whether args ask for help before any "--".
func helpAsked(args []string) bool {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
}
