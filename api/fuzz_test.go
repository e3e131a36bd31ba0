package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"testing"

	"kmirror/service"
)

// FuzzReadJSON feeds every request body type of the API through readJSON:
// any body is decoded or refused with a bodyError or a ValidationError
// (400/413/415), never a panic or another error; an accepted body is valid
// JSON with no key twice and no NUL character in a string. The seeds run
// with every `go test`; docs/fuzzing.md says how long it was fuzzed.
func FuzzReadJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"m1","source":{"bootstrap_servers":"h:1"},"config":{"topics.include":"x"}}`,
		`{"source":{"sasl_password":"p"},"config":{"a":null}}`,
		`{"topic":"orders|payments","replication_factor":3,"recreate":true}`,
		`{"topic":"a","topic":"b"}`, `{"topic":"a","TOPIC":"b"}`, `{"topic":"a\u0000"}`,
		`{"topic":"a"} {}`, `{"x":1}`, `[]`, ``, `{`, `{"config":{"k":"v","k":"w"}}`, `"\ud800"`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		dst := []any{&CreateMirrorRequest{}, &UpdateMirrorRequest{}, &AddTopicsRequest{}, &TopicsRequest{}}[int(which)%4]
		r := httptest.NewRequest("POST", "/v1/x", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		err := readJSON(r, dst)
		if err != nil {
			var be *bodyError
			var ve *service.ValidationError
			if !errors.As(err, &be) && !errors.As(err, &ve) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if k := duplicateKey(body); k != "" {
			t.Fatalf("accepted key %q twice in %q", k, body)
		}
		if f := badTextField(reflect.ValueOf(dst), ""); f != "" {
			t.Fatalf("accepted a NUL in %s", f)
		}
	})
}

// FuzzDuplicateKey: the duplicate-key walk never panics on any input, and
// finds nothing in JSON that Go re-encodes from a map (which cannot repeat
// a key) unless two keys differ only in case.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"b":{"a":1}}`, `[{"a":1},{"a":1}]`, `{"A":1,"a":2}`, `{`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = duplicateKey(body)
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		again, _ := json.Marshal(v)
		if k := duplicateKey(again); k != "" && !caseFolded(v) {
			t.Fatalf("key %q twice in re-encoded %s", k, again)
		}
	})
}

// caseFolded reports an object, at any depth, with two keys equal but for
// case.
func caseFolded(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		seen := map[string]bool{}
		for k, e := range x {
			if seen[lower(k)] || caseFolded(e) {
				return true
			}
			seen[lower(k)] = true
		}
	case []any:
		for _, e := range x {
			if caseFolded(e) {
				return true
			}
		}
	}
	return false
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }
