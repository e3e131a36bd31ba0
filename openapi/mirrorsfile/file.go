package mirrorsfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// APIVersion and Kind head every file; another version is refused rather
// than read with this one's meaning.
const (
	APIVersion = "kmirror/v1"
	Kind       = "Mirrors"
)

// File is a mirrors file: the mirrors a deployment should have.
type File struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Mirrors    []Mirror `yaml:"mirrors"`

	// dir is where {file: PATH} references are resolved from: the file's
	// own directory, so a file means the same wherever CI runs it.
	dir string
}

// Mirror is one mirror: the API's CreateMirrorRequest, with secrets
// replaced by where to read them, and its topics.
type Mirror struct {
	Name   string `yaml:"name"`
	Source Source `yaml:"source"`
	// Config is every config key set on the mirror: a key the mirror has
	// and the file does not returns to its default.
	Config map[string]string `yaml:"config,omitempty"`
	Topics []Topic           `yaml:"topics,omitempty"`
}

// Source is the API's SourceSpec, with its field names. Secrets are
// *Secret; PEM certificates are Text (inline, or {file: PATH}).
type Source struct {
	BootstrapServers string  `yaml:"bootstrap_servers"`
	SecurityProtocol string  `yaml:"security_protocol,omitempty"`
	SASLMechanism    string  `yaml:"sasl_mechanism,omitempty"`
	SASLUsername     string  `yaml:"sasl_username,omitempty"`
	SASLPassword     *Secret `yaml:"sasl_password,omitempty"`
	TLSCAPEM         *Text   `yaml:"tls_ca_pem,omitempty"`
	TLSCertPEM       *Text   `yaml:"tls_cert_pem,omitempty"`
	TLSKeyPEM        *Secret `yaml:"tls_key_pem,omitempty"`
	TLSServerName    string  `yaml:"tls_server_name,omitempty"`

	AWSAccessKeyID     string  `yaml:"aws_access_key_id,omitempty"`
	AWSSecretAccessKey *Secret `yaml:"aws_secret_access_key,omitempty"`
	AWSSessionToken    *Secret `yaml:"aws_session_token,omitempty"`
	AWSRegion          string  `yaml:"aws_region,omitempty"`

	OAuthTokenEndpointURL string            `yaml:"sasl_oauthbearer_token_endpoint_url,omitempty"`
	OAuthClientID         string            `yaml:"sasl_oauthbearer_client_id,omitempty"`
	OAuthClientSecret     *Secret           `yaml:"sasl_oauthbearer_client_secret,omitempty"`
	OAuthScope            string            `yaml:"sasl_oauthbearer_scope,omitempty"`
	OAuthExtensions       map[string]string `yaml:"sasl_oauthbearer_extensions,omitempty"`

	SchemaRegistry *SchemaRegistry `yaml:"schema_registry,omitempty"`
}

// SchemaRegistry is the API's SchemaRegistrySpec.
type SchemaRegistry struct {
	URLs              []string `yaml:"urls"`
	BasicAuthUsername string   `yaml:"basic_auth_username,omitempty"`
	BasicAuthPassword *Secret  `yaml:"basic_auth_password,omitempty"`
	BearerToken       *Secret  `yaml:"bearer_token,omitempty"`
	TLSCAPEM          *Text    `yaml:"tls_ca_pem,omitempty"`
	TLSCertPEM        *Text    `yaml:"tls_cert_pem,omitempty"`
	TLSKeyPEM         *Secret  `yaml:"tls_key_pem,omitempty"`
	TLSServerName     string   `yaml:"tls_server_name,omitempty"`
}

// State is what the file asks of the topics an entry matches: the API's
// desired_state.
type State string

const (
	StateMirroring State = "mirroring"
	StatePaused    State = "paused"
	// StateStopped is a removed topic (topics:remove, a failover);
	// "removed" in a file means the same.
	StateStopped State = "stopped"
)

// Topic is one entry of a mirror's topics: an RE2 pattern matched against
// whole source topic names, as topics:add takes it, and what the topics it
// matches should be. A topic is governed by the first entry that matches
// it.
type Topic struct {
	Topic string `yaml:"topic"`
	// State is mirroring when omitted.
	State State `yaml:"state,omitempty"`
	// ReplicationFactor of the destination topics kmirror creates; omitted
	// (or -1), the destination's default. An existing topic keeps its own.
	ReplicationFactor int `yaml:"replication_factor,omitempty"`
	// Recreate, Continue and KeepDivergent are topics:add's, used when a
	// stopped topic is restarted (Opts.RestartStopped).
	Recreate      bool `yaml:"recreate,omitempty"`
	Continue      bool `yaml:"continue,omitempty"`
	KeepDivergent bool `yaml:"keep_divergent,omitempty"`
}

// state is the entry's state, its default filled in.
func (t Topic) state() State {
	if t.State == "removed" {
		return StateStopped
	}
	if t.State == "" {
		return StateMirroring
	}
	return t.State
}

// Load reads and validates a mirrors file; {file: PATH} references are
// resolved from its directory.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse reads and validates a mirrors file's bytes; dir is where {file:
// PATH} references are resolved from.
func Parse(b []byte, dir string) (*File, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	// Before decoding: a secret given as a plain value is refused by name,
	// and never echoed.
	if err := checkSecretNodes(&root); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	f.dir = dir
	if err := f.validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// validate checks what can be checked without the server; the server
// validates the sources and config keys themselves (Plan asks it).
func (f *File) validate() error {
	var errs []error
	if f.APIVersion != APIVersion {
		errs = append(errs, fmt.Errorf("apiVersion is %q: this kmirror reads %s", f.APIVersion, APIVersion))
	}
	if f.Kind != Kind {
		errs = append(errs, fmt.Errorf("kind is %q: want %s", f.Kind, Kind))
	}
	seen := map[string]bool{}
	for i, m := range f.Mirrors {
		where := fmt.Sprintf("mirrors[%d]", i)
		if m.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		} else {
			where = fmt.Sprintf("mirrors[%d] (%s)", i, m.Name)
		}
		if seen[m.Name] && m.Name != "" {
			errs = append(errs, fmt.Errorf("%s: the mirror is named twice", where))
		}
		seen[m.Name] = true
		if m.Source.BootstrapServers == "" {
			errs = append(errs, fmt.Errorf("%s: source.bootstrap_servers is required", where))
		}
		if r := m.Source.SchemaRegistry; r != nil && len(r.URLs) == 0 {
			errs = append(errs, fmt.Errorf("%s: source.schema_registry.urls is required (omit schema_registry for none)", where))
		}
		for j, t := range m.Topics {
			tw := fmt.Sprintf("%s: topics[%d]", where, j)
			if t.Topic == "" {
				errs = append(errs, fmt.Errorf("%s: topic (an RE2 pattern) is required", tw))
			} else if _, err := compilePattern(t.Topic); err != nil {
				errs = append(errs, fmt.Errorf("%s: topic %q: %v", tw, t.Topic, err))
			}
			switch t.State {
			case "", StateMirroring, StatePaused, StateStopped, "removed":
			default:
				errs = append(errs, fmt.Errorf("%s: state %q is not mirroring, paused or stopped (removed)", tw, t.State))
			}
			if t.ReplicationFactor < -1 || t.ReplicationFactor > 32767 {
				errs = append(errs, fmt.Errorf("%s: replication_factor %d is out of range [1, 32767] (-1 or omitted: the destination's default)", tw, t.ReplicationFactor))
			}
			if t.Recreate && t.Continue {
				errs = append(errs, fmt.Errorf("%s: recreate drops the destination topic and continue keeps what it holds: give one of them", tw))
			}
			if t.KeepDivergent && !t.Continue {
				errs = append(errs, fmt.Errorf("%s: keep_divergent says what continue does with a divergent tail: give it with continue", tw))
			}
		}
	}
	return errors.Join(errs...)
}

// compilePattern compiles a topic pattern as the server matches it: the
// whole name.
func compilePattern(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}

// literalNames returns the names a pattern matches when it is an
// alternation of literals ("orders|payments", `orders\.v1`), as export
// writes them: those can be matched without asking the source.
func literalNames(p string) ([]string, bool) {
	var names []string
	for _, part := range splitAlternation(p) {
		re, err := regexp.Compile(part)
		if err != nil {
			return nil, false
		}
		lit, complete := re.LiteralPrefix()
		if !complete || lit == "" {
			return nil, false
		}
		names = append(names, lit)
	}
	slices.Sort(names)
	return slices.Compact(names), len(names) > 0
}

// splitAlternation splits a pattern at its top-level |.
func splitAlternation(p string) []string {
	var parts []string
	depth, class, start := 0, false, 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case class:
			class = c != ']'
		case c == '[':
			class = true
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			parts = append(parts, p[start:i])
			start = i + 1
		}
	}
	return append(parts, p[start:])
}

// exactPattern is an RE2 pattern matching exactly these names.
func exactPattern(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return strings.Join(quoted, "|")
}

// patternChunks splits names into exact patterns the server takes (it
// refuses patterns over 8 KiB).
func patternChunks(names []string) []string {
	const max = 4 << 10
	var out []string
	var cur []string
	size := 0
	for _, n := range names {
		q := len(regexp.QuoteMeta(n)) + 1
		if size+q > max && len(cur) > 0 {
			out = append(out, exactPattern(cur))
			cur, size = nil, 0
		}
		cur = append(cur, n)
		size += q
	}
	if len(cur) > 0 {
		out = append(out, exactPattern(cur))
	}
	return out
}
