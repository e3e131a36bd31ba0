package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestBadInputChangesNothing sends every kind of bad request body and bad
// field, checking each gets its own problem and leaves the database as it was.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "orders")

	// mirror builds a create body around a source; extra fields are merged in.
	mirror := func(name string, source map[string]any, extra ...any) map[string]any {
		b := map[string]any{"name": name, "source": source}
		for i := 0; i+1 < len(extra); i += 2 {
			b[extra[i].(string)] = extra[i+1]
		}
		return b
	}
	src := map[string]any{"bootstrap_servers": e.bootstrap}
	bootstrap := func(s string) map[string]any { return map[string]any{"bootstrap_servers": s} }
	withConfig := func(k, v string) map[string]any {
		return mirror("m2", src, "config", map[string]string{k: v})
	}
	oversize := `{"name": "m2", "source": {"bootstrap_servers": "` + strings.Repeat("a", 1<<20) + `"}}`

	cases := []struct {
		name        string
		method      string
		path        string
		body        any
		contentType string
		status      int
		kind        string
		details     []string
		fields      []string // the problem's errors[].field, in order, when set
	}{
		// The body itself.
		{name: "malformed JSON", body: `{"name": m2}`,
			status: 400, kind: "malformed-json", details: []string{"malformed JSON at byte", "invalid character 'm'"}},
		{name: "truncated JSON", body: `{"name": "m2", "source": {`,
			status: 400, kind: "malformed-json", details: []string{"unexpected end of input"}},
		{name: "trailing data", body: `{"name": "m2", "source": {"bootstrap_servers": "h:1"}} {}`,
			status: 400, kind: "malformed-json", details: []string{"data after the JSON value"}},
		{name: "empty body", body: "",
			status: 400, kind: "malformed-json", details: []string{"request body is empty"}},
		{name: "blank body", body: " \n\t ",
			status: 400, kind: "malformed-json", details: []string{"request body is empty"}},
		{name: "unknown field", body: mirror("m2", src, "colour", "red"),
			status: 400, kind: "unknown-field", details: []string{`unknown field "colour"`}},
		{name: "unknown nested field", body: mirror("m2", map[string]any{"bootstrap_servers": e.bootstrap, "sasl_pass": "x"}),
			status: 400, kind: "unknown-field", details: []string{`unknown field "sasl_pass"`}},
		{name: "wrong JSON type", body: `{"name": 5, "source": {"bootstrap_servers": "h:1"}}`,
			status: 400, kind: "validation", details: []string{`field "name" must be a string, not JSON number`}},
		{name: "body not an object", body: `["m2"]`,
			status: 400, kind: "validation", details: []string{"the request body must be an object, not JSON array"}},
		{name: "nested object of the wrong type", body: `{"name": "m2", "source": "h:1"}`,
			status: 400, kind: "validation", details: []string{`field "source" must be an object, not JSON string`}},
		{name: "config value not a string", body: `{"name": "m2", "source": {"bootstrap_servers": "h:1"}, "config": {"mirror.metadata.refresh.interval.ms": 5000}}`,
			status: 400, kind: "validation", details: []string{`field "config" must be a string, not JSON number`}},
		{name: "body over 1 MiB", body: oversize,
			status: 413, kind: "body-too-large", details: []string{"larger than 1048576 bytes"}},
		{name: "text/plain", body: mirror("m2", src), contentType: "text/plain",
			status: 415, kind: "unsupported-media-type", details: []string{`"text/plain"`, "application/json"}},
		{name: "form encoded", body: "name=m2", contentType: "application/x-www-form-urlencoded",
			status: 415, kind: "unsupported-media-type", details: []string{"application/x-www-form-urlencoded"}},
		{name: "unparsable content type", body: mirror("m2", src), contentType: "application/json; =",
			status: 415, kind: "unsupported-media-type"},
		{name: "bad dry_run", path: "/v1/mirrors?dry_run=maybe", body: mirror("m2", src),
			status: 400, kind: "validation", details: []string{"dry_run", "true or false"}, fields: []string{"dry_run"}},

		// Mirror names.
		{name: "name with a space", body: mirror("bad name", src),
			status: 400, kind: "validation", details: []string{`"bad name"`, "1-249 characters"}, fields: []string{"name"}},
		{name: "name of 250 characters", body: mirror(strings.Repeat("n", 250), src),
			status: 400, kind: "validation", details: []string{"1-249 characters"}, fields: []string{"name"}},
		{name: "name with a slash", body: mirror("a/b", src),
			status: 400, kind: "validation", details: []string{`"a/b"`}, fields: []string{"name"}},
		// Kafka forbids "." and ".." as topic names; as a mirror name they
		// could not be addressed in a URL path (clients resolve dot segments).
		{name: "name .", body: mirror(".", src),
			status: 400, kind: "validation", details: []string{`mirror name "."`}, fields: []string{"name"}},
		{name: "name ..", body: mirror("..", src),
			status: 400, kind: "validation", details: []string{`mirror name ".."`}, fields: []string{"name"}},
		{name: "empty name", body: mirror("", src),
			status: 400, kind: "validation", details: []string{`mirror name ""`}, fields: []string{"name"}},

		// Config.
		{name: "invalid regex in config", body: withConfig("topics.include", "("),
			status: 400, kind: "validation", details: []string{"config.topics.include", "invalid regular expression", `"("`},
			fields: []string{"config.topics.include"}},
		{name: "unknown config key", body: withConfig("mirror.bogus", "1"),
			status: 400, kind: "validation", details: []string{`unknown config key "mirror.bogus"`, "mirror.metadata.refresh.interval.ms"},
			fields: []string{"config.mirror.bogus"}},
		{name: "config value not an integer", body: withConfig("mirror.metadata.refresh.interval.ms", "abc"),
			status: 400, kind: "validation", details: []string{`value "abc" is not an integer`},
			fields: []string{"config.mirror.metadata.refresh.interval.ms"}},
		{name: "config value below range", body: withConfig("mirror.metadata.refresh.interval.ms", "5"),
			status: 400, kind: "validation", details: []string{"value 5 is out of range [1000, 86400000]"},
			fields: []string{"config.mirror.metadata.refresh.interval.ms"}},
		{name: "config value above range", body: withConfig("mirror.metadata.refresh.interval.ms", "86400001"),
			status: 400, kind: "validation", details: []string{"out of range"},
			fields: []string{"config.mirror.metadata.refresh.interval.ms"}},
		{name: "unknown compression type", body: withConfig("mirror.compression.type", "brotli"),
			status: 400, kind: "validation", details: []string{`value "brotli" is not one of source, none, gzip, snappy, lz4, zstd`},
			fields: []string{"config.mirror.compression.type"}},
		{name: "throttle below its floor", body: withConfig("mirror.replication.throttled.rate", "100"),
			status: 400, kind: "validation", details: []string{"value 100 is below 1024 bytes a second (0 turns the throttle off)"},
			fields: []string{"config.mirror.replication.throttled.rate"}},
		{name: "bad list config", body: withConfig("topic.properties.exclude", "a*b"),
			status: 400, kind: "validation", details: []string{"* is only allowed at the end"},
			fields: []string{"config.topic.properties.exclude"}},

		// Source connection.
		{name: "empty bootstrap servers", body: mirror("m2", bootstrap("")),
			status: 400, kind: "validation", details: []string{"source.bootstrap_servers", "at least one host:port"},
			fields: []string{"source.bootstrap_servers"}},
		{name: "bootstrap without port", body: mirror("m2", bootstrap("nohost")),
			status: 400, kind: "validation", details: []string{`"nohost" is not host:port`}, fields: []string{"source.bootstrap_servers"}},
		{name: "bootstrap port out of range", body: mirror("m2", bootstrap("h:99999")),
			status: 400, kind: "validation", details: []string{`"h:99999" has an invalid port`}, fields: []string{"source.bootstrap_servers"}},
		{name: "bootstrap with an empty entry", body: mirror("m2", bootstrap("h:1,")),
			status: 400, kind: "validation", details: []string{"is not host:port"}, fields: []string{"source.bootstrap_servers"}},
		{name: "unknown security protocol", body: mirror("m2", map[string]any{"bootstrap_servers": e.bootstrap, "security_protocol": "TLS"}),
			status: 400, kind: "validation", details: []string{`"TLS" is not one of`}, fields: []string{"source.security_protocol"}},
		{name: "SASL without credentials", body: mirror("m2", map[string]any{"bootstrap_servers": e.bootstrap, "security_protocol": "SASL_PLAINTEXT"}),
			status: 400, kind: "validation", details: []string{"source.sasl_mechanism", "source.sasl_username: required with SASL_PLAINTEXT", "source.sasl_password: required"},
			fields: []string{"source.sasl_mechanism", "source.sasl_username", "source.sasl_password"}},
		{name: "sasl_password with PLAINTEXT", body: mirror("m2", map[string]any{"bootstrap_servers": e.bootstrap, "sasl_password": "hunter2"}),
			status: 400, kind: "validation", details: []string{"source.sasl_password: only allowed with SASL_PLAINTEXT or SASL_SSL"},
			fields: []string{"source.sasl_password"}},
		{name: "TLS fields with PLAINTEXT", body: mirror("m2", map[string]any{"bootstrap_servers": e.bootstrap, "tls_server_name": "k"}),
			status: 400, kind: "validation", details: []string{"source.tls_server_name: only allowed with SSL or SASL_SSL"},
			fields: []string{"source.tls_server_name"}},
		{name: "every error at once", body: mirror("a b", bootstrap("nohost"), "config", map[string]string{"x": "1"}),
			status: 400, kind: "validation", fields: []string{"name", "source.bootstrap_servers", "config.x"}},
		{name: "duplicate mirror", body: mirror("m1", src),
			status: 409, kind: "conflict", details: []string{"mirror m1 already exists"}},
		{name: "dry run of a duplicate mirror", path: "/v1/mirrors?dry_run=true", body: mirror("m1", src),
			status: 409, kind: "conflict", details: []string{"mirror m1 already exists"}},

		// Updates.
		{name: "patch: bad config value", method: "PATCH", path: "/v1/mirrors/m1",
			body:   map[string]any{"config": map[string]any{"mirror.metadata.refresh.interval.ms": "abc"}},
			status: 400, kind: "validation", details: []string{`value "abc" is not an integer`}},
		{name: "patch: reset of an unknown key", method: "PATCH", path: "/v1/mirrors/m1",
			body:   map[string]any{"config": map[string]any{"mirror.bogus": nil}},
			status: 400, kind: "validation", details: []string{`unknown config key "mirror.bogus"`}},
		{name: "patch: password on a PLAINTEXT source", method: "PATCH", path: "/v1/mirrors/m1",
			body:   map[string]any{"source": map[string]any{"sasl_password": "hunter2"}},
			status: 400, kind: "validation", details: []string{"source.sasl_password"}},
		{name: "patch: SASL without credentials", method: "PATCH", path: "/v1/mirrors/m1?skip_connectivity_check=true",
			body:   map[string]any{"source": map[string]any{"security_protocol": "SASL_SSL"}},
			status: 400, kind: "validation", details: []string{"source.sasl_username: required with SASL_SSL"}},
		{name: "patch: bad bootstrap", method: "PATCH", path: "/v1/mirrors/m1",
			body:   map[string]any{"source": map[string]any{"bootstrap_servers": "h:0"}},
			status: 400, kind: "validation", details: []string{`"h:0" has an invalid port`}},
		{name: "patch: unknown field", method: "PATCH", path: "/v1/mirrors/m1", body: map[string]any{"name": "m3"},
			status: 400, kind: "unknown-field", details: []string{`unknown field "name"`}},
		{name: "patch: wrong content type", method: "PATCH", path: "/v1/mirrors/m1", body: "{}", contentType: "text/json",
			status: 415, kind: "unsupported-media-type"},

		// Topic actions.
		{name: "add: invalid regex", path: "/v1/mirrors/m1/topics:add", body: map[string]any{"topic": "("},
			status: 400, kind: "validation", details: []string{"topic: invalid regular expression", `"("`}, fields: []string{"topic"}},
		{name: "add: empty pattern", path: "/v1/mirrors/m1/topics:add", body: map[string]any{"topic": ""},
			status: 400, kind: "validation", details: []string{"pattern is empty"}, fields: []string{"topic"}},
		{name: "add: replication factor 0", path: "/v1/mirrors/m1/topics:add", body: map[string]any{"topic": "payments", "replication_factor": 0},
			status: 400, kind: "validation", details: []string{"0 is out of range [1, 32767]"}, fields: []string{"replication_factor"}},
		{name: "add: replication factor not an integer", path: "/v1/mirrors/m1/topics:add", body: `{"topic": "payments", "replication_factor": 1e10}`,
			status: 400, kind: "validation", details: []string{`field "replication_factor" must be an integer, not JSON number 1e10`}},
		{name: "add: recreate and continue", path: "/v1/mirrors/m1/topics:add", body: map[string]any{"topic": "payments", "recreate": true, "continue": true},
			status: 400, kind: "validation", details: []string{"recreate drops the destination topic and continue keeps what it holds"}},
		{name: "add: unknown field", path: "/v1/mirrors/m1/topics:add", body: map[string]any{"topics": "payments"},
			status: 400, kind: "unknown-field", details: []string{`unknown field "topics"`}},
		{name: "pause: invalid regex", path: "/v1/mirrors/m1/topics:pause", body: map[string]any{"topic": "o[rders"},
			status: 400, kind: "validation", details: []string{"invalid regular expression"}},
		{name: "pause: recreate is not a pause field", path: "/v1/mirrors/m1/topics:pause", body: map[string]any{"topic": "orders", "recreate": true},
			status: 400, kind: "unknown-field", details: []string{`unknown field "recreate"`}},
		{name: "resume: empty body", path: "/v1/mirrors/m1/topics:resume", body: "",
			status: 400, kind: "malformed-json"},
		{name: "remove: malformed JSON", path: "/v1/mirrors/m1/topics:remove", body: "{topic: orders}",
			status: 400, kind: "malformed-json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path := c.method, c.path
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/v1/mirrors"
			}
			before := e.snapshot(t)
			ct := c.contentType
			if ct == "" {
				ct = "application/json"
			}
			r := e.do(t, method, path, c.body, "Content-Type", ct)
			p := wantProblem(t, r, c.status, c.kind, c.details...)
			if c.fields != nil {
				var got []string
				for _, f := range p.Errors {
					got = append(got, f.Field)
				}
				if fmt.Sprint(got) != fmt.Sprint(c.fields) {
					t.Fatalf("problem errors name fields %v, want %v (%s)", got, c.fields, r.body)
				}
			}
			e.unchanged(t, before)
		})
	}
}

// TestOversizeBodyOnTopicActions checks the size cap applies to every
// endpoint that reads a body.
func TestOversizeBodyOnTopicActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	body := `{"topic": "` + strings.Repeat("x", 1<<20) + `"}`
	for _, path := range []string{"/v1/mirrors/m1/topics:add", "/v1/mirrors/m1/topics:pause", "/v1/mirrors/m1"} {
		method := "POST"
		if path == "/v1/mirrors/m1" {
			method = "PATCH"
		}
		before := e.snapshot(t)
		wantProblem(t, e.do(t, method, path, body), http.StatusRequestEntityTooLarge, "body-too-large", "1048576")
		e.unchanged(t, before)
	}
}
