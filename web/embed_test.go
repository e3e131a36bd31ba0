package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandlerServesTheConsole: index.html at "/", modules under "/ui/"
// with a JavaScript type, the content policy on every answer, and nothing
// else.
func TestHandlerServesTheConsole(t *testing.T) {
	h := Handler()
	for _, c := range []struct {
		path, status, typ, body string
	}{
		{"/", "200", "text/html", `<script type="module" src="/ui/js/main.js">`},
		{"/ui/js/main.js", "200", "text/javascript", "import"},
		{"/ui/app.css", "200", "text/css", "prefers-color-scheme: dark"},
		{"/ui/js/nope.js", "404", "", ""},
		{"/index.html", "404", "", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if got := rec.Result().Status[:3]; got != c.status {
			t.Errorf("%s: status %s, want %s", c.path, got, c.status)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("%s: content policy %q", c.path, csp)
		}
		if c.status != "200" {
			continue
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, c.typ) {
			t.Errorf("%s: content type %q, want %s", c.path, ct, c.typ)
		}
		if !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("%s: body lacks %q", c.path, c.body)
		}
	}
}

// TestNoThirdPartyReferences: the embedded console names no other origin,
// so nothing can be fetched from elsewhere at run time.
func TestNoThirdPartyReferences(t *testing.T) {
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		// The SVG namespace is a name and url(#id) a reference within the
		// page, not fetches.
		text := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
		text = strings.ReplaceAll(text, "url(#", "")
		for _, bad := range []string{"http://", "https://", "//cdn", "@import", "url("} {
			if strings.Contains(text, bad) {
				t.Errorf("%s mentions %q", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
