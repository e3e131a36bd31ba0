package service

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// nameRE is Kafka's legal topic-name alphabet, which mirror names share.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// validName applies Kafka's topic-name rules, "." and ".." excluded: in a
// URL path they are dot segments, so such a mirror could not be addressed.
func validName(s string) bool { return nameRE.MatchString(s) && s != "." && s != ".." }

func validateMirrorName(v *validation, name string) {
	switch {
	case name == "." || name == "..":
		v.addf("name", "mirror name %q is not allowed: a URL path cannot address it (Kafka forbids it as a topic name too)", name)
	case !validName(name):
		v.addf("name", "mirror name %q must be 1-249 characters of [a-zA-Z0-9._-]", name)
	}
}

// A pattern's size is bounded, so matching it against every topic of a
// large cluster stays bounded too: RE2 matches in time linear in the name,
// but also in the compiled program's size, which repetition multiplies
// ((.*){1000} compiles to 4,000 instructions, and matching a program that
// size against every topic of a large cluster would hold the request past
// its deadline).
const (
	maxPatternBytes = 8 << 10
	maxPatternInsts = 20_000
)

// CompilePattern compiles an RE2 pattern that must match a whole name.
func CompilePattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, fmt.Errorf("pattern is empty")
	}
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("pattern is %d bytes, more than the %d allowed", len(pattern), maxPatternBytes)
	}
	if re, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		// Estimated from the parse tree first: compiling is what costs, and
		// (?:ab|cd|ef){1000} 400 times over (7 KiB) takes 10s of CPU to
		// compile to 3.2 million instructions.
		n := progSize(re)
		if n <= maxPatternInsts {
			if prog, err := syntax.Compile(re.Simplify()); err == nil {
				n = len(prog.Inst)
			}
		}
		if n > maxPatternInsts {
			return nil, fmt.Errorf("pattern %.64q compiles to about %d instructions, more than the %d allowed; write it without nested or large repetitions",
				pattern, n, maxPatternInsts)
		}
	}
	// Compiled alone first so an error quotes the operator's pattern, not
	// the anchored one.
	if _, err := regexp.Compile(pattern); err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return nil, fmt.Errorf("invalid regular expression %q: %s", pattern, se.Code)
		}
		return nil, fmt.Errorf("invalid regular expression %q: %v", pattern, err)
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// progSize estimates, from above, how many instructions re compiles to,
// without compiling it: repetitions multiply their operand's size.
func progSize(re *syntax.Regexp) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpRepeat:
		count := re.Max
		if count < 0 {
			count = re.Min + 1
		}
		n = (progSize(re.Sub[0]) + 1) * max(count, 1)
	default:
		for _, sub := range re.Sub {
			n += progSize(sub) + 1
		}
	}
	return min(n, 1<<30) // nested repeats are at most 1,000 in all, so this does not overflow
}

// ParseBootstrapServers splits a comma-separated list of host:port entries,
// checking each one.
func ParseBootstrapServers(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("at least one host:port is required")
	}
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%q is not host:port", e)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q has an invalid port", e)
		}
		out = append(out, e)
	}
	return out, nil
}
