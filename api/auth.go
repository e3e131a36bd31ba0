package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"

	"kmirror/service"
)

// Token is one API token as the server knows it: a name (the actor in the
// audit trail), a role, and the SHA-256 of the token, never the token.
type Token struct {
	Name string
	Role Role
	Hash [sha256.Size]byte
}

// Tokens are the bearer tokens the server accepts. With none the API is
// open (kmirror dev on loopback, or --insecure-no-auth) and every caller
// is an admin.
type Tokens struct {
	// Admin (KMIRROR_API_TOKEN) is an admin token named "api-token".
	Admin string
	// Read (KMIRROR_API_READ_TOKEN) is a viewer token named
	// "api-read-token".
	Read string
	// File are the tokens of --api-tokens-file.
	File []Token
}

// Enabled says whether the server checks tokens.
func (t Tokens) Enabled() bool { return t.Admin != "" || t.Read != "" || len(t.File) > 0 }

// all returns every token with its hash.
func (t Tokens) all() []Token {
	out := append([]Token(nil), t.File...)
	if t.Admin != "" {
		out = append(out, Token{Name: "api-token", Role: RoleAdmin, Hash: sha256.Sum256([]byte(t.Admin))})
	}
	if t.Read != "" {
		out = append(out, Token{Name: "api-read-token", Role: RoleViewer, Hash: sha256.Sum256([]byte(t.Read))})
	}
	return out
}

// Validate refuses two tokens of one name (the audit trail could not tell
// them apart), a name of the environment's tokens included, and two
// tokens that are the same.
func (t Tokens) Validate() error {
	seen := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for _, tok := range t.all() {
		if seen[tok.Name] {
			return fmt.Errorf("two API tokens are named %s (KMIRROR_API_TOKEN is api-token, KMIRROR_API_READ_TOKEN api-read-token)", tok.Name)
		}
		if hashes[tok.Hash] {
			return fmt.Errorf("API token %s is the same token as another", tok.Name)
		}
		seen[tok.Name], hashes[tok.Hash] = true, true
	}
	return nil
}

// roleRank orders the roles: each may do what the ones below it may.
var roleRank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// caller is who made a request.
type caller struct {
	name string
	role Role
	// token: the caller presented a valid token (the server has tokens).
	token bool
}

// anonymous is every caller of a server without tokens.
var anonymous = caller{name: "anonymous", role: RoleAdmin}

func callerOf(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKeyCtx).(caller); ok {
		return c
	}
	return anonymous
}

// authenticate answers 401 for a missing or unknown bearer token and puts
// the caller in the context. The token is hashed and compared with every
// known hash in constant time, so neither its value nor which token
// matched shows in the timing; it is never logged.
func authenticate(t Tokens) func(http.Handler) http.Handler {
	known := t.all()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(known) == 0 {
				next.ServeHTTP(w, withCaller(r, anonymous))
				return
			}
			got, ok := bearerToken(r)
			if !ok || got == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kmirror"`)
				writeProblem(w, r, kindUnauthenticated, "this server needs an Authorization: Bearer token", nil)
				return
			}
			hash := sha256.Sum256([]byte(got))
			match := -1
			for i := range known {
				if subtle.ConstantTimeCompare(hash[:], known[i].Hash[:]) == 1 {
					match = i
				}
			}
			if match < 0 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kmirror", error="invalid_token"`)
				writeProblem(w, r, kindUnauthenticated, "the bearer token is not valid", nil)
				return
			}
			next.ServeHTTP(w, withCaller(r, caller{name: known[match].Name, role: known[match].Role, token: true}))
		})
	}
}

// withCaller puts the caller in the request's context, as the service's
// Actor too (who, from where, in which request: what every event the
// request records says), and names it in the request's log line.
func withCaller(r *http.Request, c caller) *http.Request {
	ctx := context.WithValue(r.Context(), callerKeyCtx, c)
	ctx = service.WithActor(ctx, service.Actor{Name: c.name, RemoteAddr: remoteHost(r), RequestID: requestID(ctx)})
	ctx = context.WithValue(ctx, loggerKey, logger(ctx).With("actor", c.name))
	if info := infoOf(ctx); info != nil {
		info.actor = c.name
	}
	return r.WithContext(ctx)
}

// remoteHost is the client's address without its port. It is the TCP peer:
// behind a proxy, the proxy's address (a forwarded header is not trusted).
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// requireRole answers 403 to a caller whose role is below role.
func requireRole(role Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := callerOf(r.Context())
			if roleRank[c.role] < roleRank[role] {
				writeProblem(w, r, kindForbidden, "token "+c.name+" has role "+string(c.role)+
					"; "+r.Method+" "+r.URL.Path+" needs role "+string(role)+" or higher", nil)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 7235 section 2.1), so
// "bearer" is accepted as well.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// whoami godoc
//
//	@Summary		Who the caller is
//	@Description	Whether this server checks bearer tokens, and the caller's token name and role: viewer (may only read), operator (also add, pause, resume, remove and restart topics, and request a sync) or admin (also create, patch and delete mirrors). Without tokens everyone is an admin named anonymous.
//	@ID				whoami
//	@Tags			system
//	@Produce		json
//	@Success		200	{object}	Whoami
//	@Security		BearerAuth
//	@Failure		401	{object}	Problem	"unauthenticated: no valid bearer token, when the server has tokens"
//	@Failure		500	{object}	Problem	"internal: see the server log for the request id"
//	@Router			/v1/whoami [get]
func (s *server) whoami(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	writeJSON(w, http.StatusOK, Whoami{AuthEnabled: s.authEnabled, Name: c.name, Role: c.role})
}
