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

// withRole records the caller's role. Without tokens everyone is an admin.
func withRole(r *http.Request, role Role) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), roleKey, role))
}

func roleOf(ctx context.Context) Role {
	if role, ok := ctx.Value(roleKey).(Role); ok {
		return role
	}
	return RoleAdmin
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
				next.ServeHTTP(w, withRole(r, RoleAdmin))
			case t.Read != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t.Read)) == 1:
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					writeProblem(w, r, kindForbidden, "the read-only token cannot "+r.Method+" "+r.URL.Path, nil)
					return
				}
				next.ServeHTTP(w, withRole(r, RoleViewer))
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
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Router			/v1/whoami [get]
func (s *server) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Whoami{AuthEnabled: s.authEnabled, Role: roleOf(r.Context())})
}
