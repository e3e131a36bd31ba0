package api

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Tokens are the bearer tokens the /v1 API accepts. With neither set the API
// is open (kmirror dev, a trusted network). An admin token may do anything;
// a read token may only read (GET, HEAD).
type Tokens struct {
	Admin string
	Read  string
}

func (t Tokens) enabled() bool { return t.Admin != "" || t.Read != "" }

// requireToken answers 401 for a missing or unknown bearer token and 403 for
// a read token used to change something. Tokens are compared in constant
// time and never logged.
func requireToken(t Tokens) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if !t.enabled() {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			switch {
			case !ok || got == "":
				w.Header().Set("WWW-Authenticate", `Bearer realm="kmirror"`)
				writeProblem(w, r, kindUnauthenticated, "this API needs an Authorization: Bearer token", nil)
			case t.Admin != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t.Admin)) == 1:
				next.ServeHTTP(w, r)
			case t.Read != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t.Read)) == 1:
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					writeProblem(w, r, kindForbidden, "the read-only token cannot "+r.Method+" "+r.URL.Path, nil)
					return
				}
				next.ServeHTTP(w, r)
			default:
				w.Header().Set("WWW-Authenticate", `Bearer realm="kmirror", error="invalid_token"`)
				writeProblem(w, r, kindUnauthenticated, "the bearer token is not valid", nil)
			}
		})
	}
}
