package kfakeauth

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// OAuthMechanism is the OAUTHBEARER mechanism.
const OAuthMechanism = "OAUTHBEARER"

// Issuer is an OIDC token endpoint for the client credentials grant that
// issues random tokens lasting Lifetime, and remembers each.
type Issuer struct {
	URL      string
	ClientID string
	Secret   string
	Lifetime time.Duration

	failing atomic.Bool

	mu     sync.Mutex
	tokens map[string]Issued
	order  []string
}

// SetFailing makes the issuer answer 503 to every request, or not.
func (is *Issuer) SetFailing(f bool) { is.failing.Store(f) }

// Issued is one token the issuer handed out.
type Issued struct {
	Token   string
	Scope   string
	At      time.Time
	Expires time.Time
}

// NewIssuer starts an issuer on loopback; tb's cleanup stops it.
func NewIssuer(tb testing.TB, clientID, secret string, lifetime time.Duration) *Issuer {
	tb.Helper()
	is := &Issuer{ClientID: clientID, Secret: secret, Lifetime: lifetime, tokens: map[string]Issued{}}
	srv := httptest.NewServer(http.HandlerFunc(is.serve))
	tb.Cleanup(srv.Close)
	is.URL = srv.URL + "/oauth2/token"
	return is
}

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if is.failing.Load() {
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.Form.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
	}
	w.Header().Set("Content-Type", "application/json")
	if id != is.ClientID || secret != is.Secret {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	now := time.Now()
	t := Issued{Token: hex.EncodeToString(b), Scope: r.Form.Get("scope"), At: now, Expires: now.Add(is.Lifetime)}
	is.mu.Lock()
	is.tokens[t.Token] = t
	is.order = append(is.order, t.Token)
	is.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": t.Token, "token_type": "Bearer",
		"expires_in": int(is.Lifetime / time.Second), "scope": t.Scope})
}

// Issued returns the tokens issued so far, in order.
func (is *Issuer) Issued() []Issued {
	is.mu.Lock()
	defer is.mu.Unlock()
	out := make([]Issued, len(is.order))
	for i, tok := range is.order {
		out[i] = is.tokens[tok]
	}
	return out
}

// Bearer is an OAUTHBEARER initial response, parsed.
type Bearer struct {
	Token      string
	Extensions map[string]string
}

// ParseBearer parses an OAUTHBEARER client's first message (RFC 7628
// section 3.1): "n,[a=authzid],\x01auth=Bearer <token>\x01[k=v\x01]...\x01".
func ParseBearer(b []byte) (Bearer, error) {
	gs2, rest, ok := strings.Cut(string(b), "\x01")
	if !ok || !strings.HasPrefix(gs2, "n,") || !strings.HasSuffix(rest, "\x01\x01") {
		return Bearer{}, errors.New("not an OAUTHBEARER initial response")
	}
	out := Bearer{Extensions: map[string]string{}}
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Bearer{}, fmt.Errorf("bad key=value %q", kv)
		}
		if k == "auth" {
			tok, ok := strings.CutPrefix(v, "Bearer ")
			if !ok {
				return Bearer{}, fmt.Errorf("auth %q is not a bearer token", v)
			}
			out.Token = tok
			continue
		}
		out.Extensions[k] = v
	}
	if out.Token == "" {
		return Bearer{}, errors.New("no auth=Bearer")
	}
	return out, nil
}

// Verifier accepts a token this issuer issued that has not expired, with
// exactly the extensions want; the principal is the client id.
func (is *Issuer) Verifier(want map[string]string) Verifier {
	return func(auth []byte) (string, error) {
		b, err := ParseBearer(auth)
		if err != nil {
			return "", err
		}
		is.mu.Lock()
		t, ok := is.tokens[b.Token]
		is.mu.Unlock()
		switch {
		case !ok:
			return "", errors.New("invalid_token: not issued here")
		case time.Now().After(t.Expires):
			return "", fmt.Errorf("invalid_token: expired %v ago", time.Since(t.Expires).Round(time.Millisecond))
		case !maps.Equal(b.Extensions, want):
			return "", fmt.Errorf("extensions %v, want %v", b.Extensions, want)
		}
		return is.ClientID, nil
	}
}
