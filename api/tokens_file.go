package api

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// tokenNameRE is a token's name: it is the actor of the audit trail and a
// value of GET /v1/events?actor=.
var tokenNameRE = regexp.MustCompile(`^[a-zA-Z0-9._@-]{1,64}$`)

// ParseTokensFile reads a tokens file: one token a line, as
//
//	NAME ROLE SHA256-HEX
//
// separated by spaces or tabs (what `kmirror token new` prints). Blank
// lines and lines starting with # are skipped. The file never holds a
// token, only its hash.
func ParseTokensFile(r io.Reader) ([]Token, error) {
	var out []Token
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want NAME ROLE SHA256-HEX, got %d fields", n, len(f))
		}
		t, err := parseTokenLine(f[0], f[1], f[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if slices.ContainsFunc(out, func(o Token) bool { return o.Name == t.Name }) {
			return nil, fmt.Errorf("line %d: token name %q appears twice", n, t.Name)
		}
		if slices.ContainsFunc(out, func(o Token) bool { return o.Hash == t.Hash }) {
			return nil, fmt.Errorf("line %d: token %q has the same hash as another token", n, t.Name)
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

func parseTokenLine(name, role, hash string) (Token, error) {
	var t Token
	if !tokenNameRE.MatchString(name) {
		return t, fmt.Errorf("token name %q must be 1-64 characters of [a-zA-Z0-9._@-]", name)
	}
	if !slices.Contains(roles, Role(role)) {
		return t, fmt.Errorf("token %s: role %q is not one of viewer, operator, admin", name, role)
	}
	b, err := hex.DecodeString(hash)
	if err != nil || len(b) != sha256.Size {
		return t, fmt.Errorf("token %s: %q is not a SHA-256 in hex (64 hex digits); the file holds hashes, never tokens", name, truncate(hash, 8))
	}
	t = Token{Name: name, Role: Role(role)}
	copy(t.Hash[:], b)
	return t, nil
}

// truncate keeps a mistaken token from being printed whole in an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// NewToken makes a random token (256 bits, prefixed "kmt_" so a leaked one
// is easy to find) and its tokens-file line.
func NewToken(name string, role Role) (token, line string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = "kmt_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	if _, err := parseTokenLine(name, string(role), hex.EncodeToString(sum[:])); err != nil {
		return "", "", err
	}
	return token, fmt.Sprintf("%s %s %s", name, role, hex.EncodeToString(sum[:])), nil
}
