// Package web is kmirror's web console: static HTML, CSS and JavaScript
// modules, written without a build step and embedded in the binary, so a
// plain `go build` serves it and nothing is fetched at run time. The
// console speaks only the public /v1 API.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// contentPolicy keeps the console to its own origin: no third-party script,
// style, font or connection can load even if markup were injected.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console: index.html at "/" and its assets under
// "/ui/". Pages are addressed by the URL fragment (#/mirrors/NAME), so the
// server needs no fallback routes.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Revalidate every time: the files change with the binary.
		h.Set("Cache-Control", "no-cache")
		switch {
		case r.URL.Path == "/":
			http.ServeFileFS(w, r, sub, "index.html")
		case strings.HasPrefix(r.URL.Path, "/ui/"):
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/ui")
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}
