package api

import (
	"context"
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

// Roles a caller may have. Without tokens everyone is an admin.
const (
	roleAdmin  = "admin"
	roleViewer = "viewer"
)

func withRole(r *http.Request, role string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), roleKey, role))
}

func roleOf(ctx context.Context) string {
	if role, ok := ctx.Value(roleKey).(string); ok {
		return role
	}
	return roleAdmin
}

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
				next.ServeHTTP(w, withRole(r, roleAdmin))
			case t.Read != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t.Read)) == 1:
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					writeProblem(w, r, kindForbidden, "the read-only token cannot "+r.Method+" "+r.URL.Path, nil)
					return
				}
				next.ServeHTTP(w, withRole(r, roleViewer))
			default:
				w.Header().Set("WWW-Authenticate", `Bearer realm="kmirror", error="invalid_token"`)
				writeProblem(w, r, kindUnauthenticated, "the bearer token is not valid", nil)
			}
		})
	}
}

// whoami godoc
//
//	@Summary		Who the caller is
//	@Description	Whether this server checks bearer tokens, and the caller's role: admin (the admin token, or anyone when no tokens are configured) or viewer (the read-only token, which may only read).
//	@ID				whoami
//	@Tags			system
//	@Produce		json
//	@Success		200	{object}	Whoami
//	@Failure		401	{object}	Problem
//	@Router			/v1/whoami [get]
func (s *server) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Whoami{AuthEnabled: s.authEnabled, Role: roleOf(r.Context())})
}
