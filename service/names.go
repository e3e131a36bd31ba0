package service

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// nameRE is Kafka's legal topic-name alphabet, which mirror names share.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func validName(s string) bool { return nameRE.MatchString(s) }

func validateMirrorName(v *validation, name string) {
	if !validName(name) {
		v.addf("name", "mirror name %q must be 1-249 characters of [a-zA-Z0-9._-]", name)
	}
}

// CompilePattern compiles an RE2 pattern that must match a whole name.
func CompilePattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, fmt.Errorf("pattern is empty")
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %s", pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
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
