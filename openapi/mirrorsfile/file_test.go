package mirrorsfile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const header = "apiVersion: kmirror/v1\nkind: Mirrors\n"

func TestMirrorsFileParseErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ text, want string }{
		"plain secret": {header + `mirrors:
  - name: east
    source:
      bootstrap_servers: h:9092
      sasl_password: hunter2
`, "mirrors[0] (east): source.sasl_password (line 7): a secret is never written in the file"},
		"plain registry secret": {header + `mirrors:
  - name: east
    source:
      bootstrap_servers: h:9092
      schema_registry:
        urls: [http://r]
        bearer_token: "tok"
`, "mirrors[0] (east): source.schema_registry.bearer_token (line 9)"},
		"secret with env and file": {header + `mirrors:
  - name: east
    source:
      bootstrap_servers: h:9092
      sasl_password: {env: A, file: b}
`, "give exactly one"},
		"unknown field": {header + `mirrors:
  - name: east
    source:
      bootstrap_server: h:9092
`, "field bootstrap_server not found"},
		"version":      {"apiVersion: kmirror/v2\nkind: Mirrors\n", `apiVersion is "kmirror/v2": this kmirror reads kmirror/v1`},
		"kind":         {"apiVersion: kmirror/v1\nkind: Mirror\n", `kind is "Mirror": want Mirrors`},
		"no bootstrap": {header + "mirrors:\n  - name: east\n    source: {}\n", "mirrors[0] (east): source.bootstrap_servers is required"},
		"twice":        {header + "mirrors:\n  - {name: a, source: {bootstrap_servers: h}}\n  - {name: a, source: {bootstrap_servers: h}}\n", "mirrors[1] (a): the mirror is named twice"},
		"bad pattern":  {header + "mirrors:\n  - {name: a, source: {bootstrap_servers: h}, topics: [{topic: 'orders('}]}\n", `mirrors[0] (a): topics[0]: topic "orders("`},
		"bad state":    {header + "mirrors:\n  - {name: a, source: {bootstrap_servers: h}, topics: [{topic: x, state: gone}]}\n", `state "gone" is not mirroring, paused or stopped`},
		"keep without continue": {header + "mirrors:\n  - {name: a, source: {bootstrap_servers: h}, topics: [{topic: x, keep_divergent: true}]}\n",
			"keep_divergent says what continue does"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestMirrorsFileSecretsAndText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Parse([]byte(header+`mirrors:
  - name: east
    source:
      bootstrap_servers: h:9092
      security_protocol: sasl_ssl
      sasl_mechanism: plain
      sasl_username: u
      sasl_password: {file: pw}
      tls_ca_pem: {file: ca.pem}
    topics:
      - topic: orders
        state: removed
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := f.Mirrors[0].Source.spec(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if deref(spec.SaslPassword) != "s3cret" || !strings.HasSuffix(deref(spec.TlsCaPem), "-----END CERTIFICATE-----\n") ||
		string(deref(spec.SecurityProtocol)) != "SASL_SSL" || string(deref(spec.SaslMechanism)) != "PLAIN" {
		t.Fatalf("spec: %+v", spec)
	}
	if got := f.Mirrors[0].Topics[0].state(); got != StateStopped {
		t.Fatalf("removed reads as %q", got)
	}
	if _, err := (&Secret{Env: "MIRRORSFILE_TEST_UNSET_VARIABLE"}).resolve("", "source.sasl_password"); err == nil ||
		err.Error() != "source.sasl_password: environment variable MIRRORSFILE_TEST_UNSET_VARIABLE is empty or unset" {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestMirrorsFileMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	f := &File{APIVersion: APIVersion, Kind: Kind, Mirrors: []Mirror{{
		Name: "east.1",
		Source: Source{BootstrapServers: "h:9092", SecurityProtocol: "SASL_SSL", SASLMechanism: "PLAIN", SASLUsername: "u",
			SASLPassword:   &Secret{Env: SecretVar("east.1", "sasl_password")},
			TLSCAPEM:       &Text{Value: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"},
			SchemaRegistry: &SchemaRegistry{URLs: []string{"http://r"}, BearerToken: &Secret{Env: SecretVar("east.1", "schema_registry_bearer_token")}}},
		Config: map[string]string{"topic.name.prefix": "east."},
		Topics: []Topic{{Topic: `orders\.v1`, State: StatePaused, ReplicationFactor: 3}},
	}}}
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sasl_password: {env: KMIRROR_EAST_1_SASL_PASSWORD}",
		"# The server has this secret and never returns it: set KMIRROR_EAST_1_SCHEMA_REGISTRY_BEARER_TOKEN"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("marshalled file lacks %q:\n%s", want, b)
		}
	}
	back, err := Parse(b, "")
	if err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if !reflect.DeepEqual(back.Mirrors, f.Mirrors) {
		t.Fatalf("round trip:\n%+v\n%+v", back.Mirrors, f.Mirrors)
	}
}

func TestMirrorsFileLiteralNames(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string][]string{
		"orders":            {"orders"},
		`orders\.v1|pay`:    {"orders.v1", "pay"},
		"b|a|b":             {"a", "b"},
		"orders.*":          nil,
		"(?i)orders":        nil,
		"a|[bc]":            nil,
		`x\|y`:              {"x|y"},
		"(orders|payments)": nil, // grouped: not split, and not a literal
	} {
		got, ok := literalNames(pattern)
		if ok != (want != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("literalNames(%q) = %q, %t; want %q", pattern, got, ok, want)
		}
		if ok {
			re, _ := compilePattern(pattern)
			for _, n := range got {
				if !re.MatchString(n) {
					t.Errorf("%q does not match its literal %q", pattern, n)
				}
			}
		}
	}
	names := make([]string, 2000)
	for i := range names {
		names[i] = strings.Repeat("t", 10) + string(rune('a'+i%26)) + strings.Repeat("x", i%7)
	}
	for _, p := range patternChunks(names) {
		if len(p) > 8<<10 {
			t.Fatalf("a chunk of %d bytes, over the server's 8 KiB", len(p))
		}
	}
}
