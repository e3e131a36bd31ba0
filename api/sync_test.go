package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSyncMirrorRouting checks the ":sync" route next to the mirror's own
// routes, with a dotted mirror name, and its problems when nothing runs the
// mirror's sync (this handler runs no workers). A pass that is served is
// tested in workers, where the sync runs.
func TestSyncMirrorRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope:sync", nil), http.StatusNotFound, "not-found", "mirror nope does not exist")
	const name = "my.mirror-1"
	e.createMirror(t, name)
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/"+name+":sync", nil), http.StatusServiceUnavailable,
		"sync-unavailable", "no kmirror instance runs the metadata sync of mirror "+name)
	if n := e.count(t, `SELECT count(*) FROM events WHERE kind = 'mirror.sync_requested' AND mirror = $1`, name); n != 1 {
		t.Fatalf("%d sync_requested events, want 1", n)
	}
	ok(t, e.do(t, "GET", "/v1/mirrors/"+name, nil), http.StatusOK, nil)
	// Only POST has the action; a GET reads "my.mirror-1:sync" as a name.
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/"+name+":sync", nil), http.StatusNotFound, "not-found",
		"mirror "+name+":sync does not exist")
}

// TestSyncMirrorBody: the sync route needs no body (the CLI and the console
// send none), but one that is sent follows the rules of every body: JSON
// only, at most 1 MiB, and nothing in it, since there is nothing to ask
// for. A refused body records no sync request. Bodies that pass reach the
// service, which answers 503 here (no instance runs the sync).
func TestSyncMirrorBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "m1"
	e.createMirror(t, name)
	path := "/v1/mirrors/" + name + ":sync"
	requested := func() int64 {
		return e.count(t, `SELECT count(*) FROM events WHERE kind = 'mirror.sync_requested' AND mirror = $1`, name)
	}
	refused := []struct {
		name, ct string
		body     string
		status   int
		kind     string
	}{
		{"multipart upload", "multipart/form-data; boundary=x", "--x\r\n" + strings.Repeat("a", 2<<20) + "\r\n--x--\r\n",
			http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"no content type", "", "{}", http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"text", "text/plain", "{}", http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"over 1 MiB", "application/json", `{"a":"` + strings.Repeat("a", 2<<20) + `"}`,
			http.StatusRequestEntityTooLarge, "body-too-large"},
		{"a field", "application/json", `{"wait":"30s"}`, http.StatusBadRequest, "unknown-field"},
		{"an array", "application/json", `[]`, http.StatusBadRequest, "validation"},
		{"null", "application/json", `null`, http.StatusBadRequest, "malformed-json"},
		{"not JSON", "application/json", `{`, http.StatusBadRequest, "malformed-json"},
		{"two values", "application/json", `{}{}`, http.StatusBadRequest, "malformed-json"},
	}
	for _, c := range refused {
		wantProblem(t, e.do(t, "POST", path, c.body, "Content-Type", c.ct), c.status, c.kind)
		if n := requested(); n != 0 {
			t.Fatalf("%s: %d sync requests recorded, want none", c.name, n)
		}
	}

	accepted := []struct {
		name string
		req  func() *http.Request
	}{
		{"no body", func() *http.Request { return e.request(t, path, nil, "") }},
		{"empty, with a content type", func() *http.Request { return e.request(t, path, strings.NewReader(""), "application/json") }},
		{"empty object", func() *http.Request { return e.request(t, path, strings.NewReader("{}"), "application/json") }},
		{"empty object, charset", func() *http.Request {
			return e.request(t, path, strings.NewReader(" {} "), "application/json; charset=utf-8")
		}},
		// A reader of unknown length is sent chunked.
		{"chunked, empty", func() *http.Request { return e.request(t, path, io.MultiReader(), "") }},
		{"chunked object", func() *http.Request {
			return e.request(t, path, io.MultiReader(strings.NewReader("{}")), "application/json")
		}},
	}
	for i, c := range accepted {
		req := c.req()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantProblem(t, response{status: resp.StatusCode, header: resp.Header, body: raw},
			http.StatusServiceUnavailable, "sync-unavailable")
		if n := requested(); n != int64(i+1) {
			t.Fatalf("%s: %d sync requests recorded, want %d", c.name, n, i+1)
		}
	}
}

// request is a POST to path with body (nil: none) and content type ct
// ("": none), for what env.do cannot send: a chunked body.
func (e *env) request(t *testing.T, path string, body io.Reader, ct string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", e.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	return req
}
