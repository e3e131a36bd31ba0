package kafkaconn

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuthAuth is how kmirror signs in with OAUTHBEARER: it gets a token from
// an OIDC provider's token endpoint with the client credentials grant
// (RFC 6749 section 4.4), as Kafka's own client does with
// sasl.oauthbearer.token.endpoint.url, and hands it to the broker with the
// SASL extensions (RFC 7628) some services require (Confluent Cloud's
// logicalCluster and identityPoolId).
type OAuthAuth struct {
	TokenEndpointURL string
	ClientID         string
	ClientSecret     string
	// Scope is the scopes to ask for, separated by spaces; empty asks for
	// none (the provider's default).
	Scope      string
	Extensions map[string]string
}

// fields names OAuthAuth's fields as the REST API does, with their values.
func (o OAuthAuth) fields() []string {
	ext := ""
	if len(o.Extensions) > 0 {
		ext = "set"
	}
	return []string{"sasl_oauthbearer_token_endpoint_url", o.TokenEndpointURL, "sasl_oauthbearer_client_id", o.ClientID,
		"sasl_oauthbearer_client_secret", o.ClientSecret, "sasl_oauthbearer_scope", o.Scope,
		"sasl_oauthbearer_extensions", ext}
}

// redactedFields is fields with the secret redacted.
func (o OAuthAuth) redactedFields() []string {
	f := o.fields()
	f[5] = Redact(o.ClientSecret)
	f[9] = strings.Join(slices.Sorted(maps.Keys(o.Extensions)), ",")
	return f
}

func (o OAuthAuth) String() string {
	return fmt.Sprintf("{token_endpoint_url=%s client_id=%s client_secret=%s scope=%s extensions=%v}",
		o.TokenEndpointURL, o.ClientID, Redact(o.ClientSecret), o.Scope, slices.Sorted(maps.Keys(o.Extensions)))
}

// Kafka's rules for SASL extensions (OAuthBearerClientInitialResponse):
// alphabetic keys, printable values; "auth" is the token's own key.
var (
	reExtensionKey   = regexp.MustCompile(`^[A-Za-z]+$`)
	reExtensionValue = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
)

// CheckTokenEndpoint reports what is wrong with a token endpoint URL. It
// must be https: the client secret travels in the request and the token in
// the answer. Plain http is taken only for a loopback host (a sidecar that
// holds the real credentials, or a test), where nothing crosses a network.
func CheckTokenEndpoint(raw string) error {
	if raw == "" {
		return errors.New("required with sasl_mechanism OAUTHBEARER")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.User != nil {
		return errors.New("must not carry credentials (use sasl_oauthbearer_client_id and sasl_oauthbearer_client_secret)")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return fmt.Errorf("must be https (http only for a loopback host), not %q", raw)
		}
	default:
		return fmt.Errorf("must be https, not %q", raw)
	}
	return nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// CheckExtensions reports the first bad SASL extension, naming its key.
func CheckExtensions(ext map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(ext)) {
		switch {
		case !reExtensionKey.MatchString(k):
			return fmt.Errorf("key %q: letters only (RFC 7628)", k)
		case k == "auth":
			return errors.New(`key "auth": reserved for the token itself`)
		case !reExtensionValue.MatchString(ext[k]):
			return fmt.Errorf("the value of %q: printable ASCII, not empty (RFC 7628)", k)
		}
	}
	return nil
}

// CheckOAuth reports what is wrong with o, naming the field.
func CheckOAuth(o OAuthAuth) error {
	if err := CheckTokenEndpoint(o.TokenEndpointURL); err != nil {
		return fmt.Errorf("sasl_oauthbearer_token_endpoint_url: %w", err)
	}
	if o.ClientID == "" {
		return errors.New("sasl_oauthbearer_client_id: required with sasl_mechanism OAUTHBEARER")
	}
	if o.ClientSecret == "" {
		return errors.New("sasl_oauthbearer_client_secret: required with sasl_mechanism OAUTHBEARER")
	}
	if err := CheckExtensions(o.Extensions); err != nil {
		return fmt.Errorf("sasl_oauthbearer_extensions: %w", err)
	}
	return nil
}

func (o OAuthAuth) mechanism() (sasl.Mechanism, error) {
	if err := CheckOAuth(o); err != nil {
		return nil, err
	}
	t := sharedOAuthTokens(o)
	ext := maps.Clone(o.Extensions)
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := t.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok.AccessToken, Extensions: ext}, nil
	}), nil
}

// OAuthTokenTimeout bounds one token request.
const OAuthTokenTimeout = 10 * time.Second

// oauthMinLife is the least life a token kept through a failed refresh
// must have left: enough for an authentication to reach the broker.
const oauthMinLife = 10 * time.Second

// OAuthTokens fetches tokens with the client credentials grant and keeps
// the last one until four fifths of its life have passed: every
// authentication of a client's connections, re-authentications included
// (KIP-368: the broker ends a session when its token expires), asks it, and
// gets a token well inside its life without a request per connection.
// oauth2.ReuseTokenSourceWithExpiry takes a fixed margin instead, which
// either wastes most of a long token or, beyond a short token's life,
// fetches one for every authentication.
type OAuthTokens struct {
	cc     clientcredentials.Config
	client *http.Client

	mu        sync.Mutex
	tok       *oauth2.Token
	refreshAt time.Time
}

// oauthTokenSources are the token sources of the process, one per client
// credentials (endpoint, client, secret, scope): the clients of one mirror
// or of mirrors with the same credentials (a fetcher, an admin client, the
// metadata sync, probes) share their tokens, rather than each asking the
// identity provider, which limits its clients' request rates. Entries stay
// for the process's life; there is one per credentials ever used.
var oauthTokenSources sync.Map // [sha256.Size]byte -> *OAuthTokens

func sharedOAuthTokens(o OAuthAuth) *OAuthTokens {
	h := sha256.New()
	for _, f := range []string{o.TokenEndpointURL, o.ClientID, o.ClientSecret, o.Scope} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	t, _ := oauthTokenSources.LoadOrStore(key, NewOAuthTokens(o))
	return t.(*OAuthTokens)
}

// NewOAuthTokens returns a token source of o's own.
func NewOAuthTokens(o OAuthAuth) *OAuthTokens {
	return &OAuthTokens{
		cc: clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenEndpointURL,
			Scopes: strings.Fields(o.Scope)},
		client: &http.Client{Timeout: OAuthTokenTimeout},
	}
}

// Token returns a token with at least a fifth of its life left, fetching
// one when needed.
func (t *OAuthTokens) Token(ctx context.Context) (*oauth2.Token, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.tok != nil && now.Before(t.refreshAt) {
		return t.tok, nil
	}
	tok, err := t.cc.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	if err != nil {
		// A provider that fails for a moment does not fail connections
		// while the last token has life left: the next call asks again.
		if t.tok != nil && time.Until(t.tok.Expiry) > oauthMinLife {
			return t.tok, nil
		}
		return nil, &credentialsError{fmt.Errorf("OAUTHBEARER: token from %s: %w", t.cc.TokenURL, err)}
	}
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("OAUTHBEARER: the token endpoint %s answered without an access_token", t.cc.TokenURL)
	}
	t.tok = tok
	// A token without expires_in is kept for a minute: the broker says
	// when it expires, and a fresh one costs one request.
	t.refreshAt = now.Add(time.Minute)
	if !tok.Expiry.IsZero() {
		t.refreshAt = now.Add(tok.Expiry.Sub(now) * 4 / 5)
	}
	return tok, nil
}
