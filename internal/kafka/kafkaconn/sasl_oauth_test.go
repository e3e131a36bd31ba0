package kafkaconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/testing/kfakeauth"
)

var testExtensions = map[string]string{"logicalCluster": "lkc-abc12", "identityPoolId": "pool-XyZ"}

// oauthCluster is a kfake cluster behind OAUTHBEARER that accepts the
// issuer's tokens with testExtensions, and ends sessions after lifetime.
func oauthCluster(t *testing.T, is *kfakeauth.Issuer, lifetime time.Duration) (*kfake.Cluster, *kfakeauth.Gate) {
	t.Helper()
	g := kfakeauth.New(kfakeauth.OAuthMechanism, lifetime, is.Verifier(testExtensions))
	c := newCluster(t, append(g.Opts(), kfake.SeedTopics(1, "orders"))...)
	g.Install(c)
	return c, g
}

func oauthConfig(c *kfake.Cluster, is *kfakeauth.Issuer) Config {
	return Config{BootstrapServers: c.ListenAddrs(), Security: Security{Protocol: ProtocolSASLPlaintext,
		SASLMechanism: MechanismOAuthBearer, OAuth: OAuthAuth{TokenEndpointURL: is.URL, ClientID: is.ClientID,
			ClientSecret: is.Secret, Scope: "kafka.read kafka.write", Extensions: testExtensions}}}
}

// TestOAuthBearerTokensAreRenewed: the token that reaches the broker is
// the one issued, with the scope asked for and the extensions; sessions
// that end (connections.max.reauth.ms) are renewed on the same client, and
// a new token is fetched before the old one expires, not one per
// authentication.
func TestOAuthBearerTokensAreRenewed(t *testing.T) {
	is := kfakeauth.NewIssuer(t, "kmirror-client", "client-secret", 3*time.Second)
	c, g := oauthCluster(t, is, 400*time.Millisecond)
	cl, err := oauthConfig(c, is).NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(15 * time.Second)
	for tick := time.NewTicker(100 * time.Millisecond); len(is.Issued()) < 2; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens issued for %d authentications; want a second before the first expires", len(is.Issued()), len(g.Auths()))
		}
		if _, err := cl.Request(t.Context(), kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
	}
	issued := is.Issued()
	if !issued[1].At.Before(issued[0].Expires) {
		t.Errorf("the second token came %v after the first expired", issued[1].At.Sub(issued[0].Expires))
	}
	for _, tok := range issued {
		if tok.Scope != "kafka.read kafka.write" {
			t.Errorf("scope asked %q, want %q", tok.Scope, "kafka.read kafka.write")
		}
	}
	auths := g.Auths()
	used := map[string]int{}
	for _, a := range auths {
		if a.Err != nil { // an unknown or expired token, or other extensions
			t.Fatalf("authentication refused: %v", a.Err)
		}
		b, _ := kfakeauth.ParseBearer(a.Bytes)
		used[b.Token]++
	}
	if used[issued[0].Token] < 2 {
		t.Errorf("the first token served %d authentications; want re-authentications to reuse it (%d in all)", used[issued[0].Token], len(auths))
	}
	noRefusals(t, g)
}

func TestOAuthBearerBadClientSecret(t *testing.T) {
	is := kfakeauth.NewIssuer(t, "kmirror-client", "client-secret", time.Minute)
	c, g := oauthCluster(t, is, 0)
	cfg := oauthConfig(c, is)
	cfg.Security.OAuth.ClientSecret = "wrong"
	_, err := TopicPartitions(t.Context(), cfg, testTimeout)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "OAUTHBEARER: token from "+is.URL) || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("wrong client secret: %v, want the token endpoint's invalid_client", err)
	}
	if len(g.Auths()) != 0 {
		t.Errorf("%d authentications reached the broker without a token", len(g.Auths()))
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error shows the client secret: %v", err)
	}
}

// TestSecurityValidation: what an operator can get wrong is refused before
// any connection, naming the field.
func TestSecurityValidation(t *testing.T) {
	oauth := OAuthAuth{TokenEndpointURL: "https://login.example.com/oauth2/token", ClientID: "id", ClientSecret: "s"}
	sasl := func(mech string, f func(*Security)) Security {
		s := Security{Protocol: ProtocolSASLSSL, SASLMechanism: mech}
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		sec  Security
		want string // "" for valid
	}{
		{"aws default chain", sasl(MechanismAWSMSKIAM, func(*Security) {}), ""},
		{"aws keys", sasl(MechanismAWSMSKIAM, func(s *Security) { s.AWS = AWSAuth{AccessKeyID: "A", SecretAccessKey: "S", Region: "us-gov-west-1"} }), ""},
		{"aws key without secret", sasl(MechanismAWSMSKIAM, func(s *Security) { s.AWS.AccessKeyID = "A" }), "aws_secret_access_key: required"},
		{"aws token alone", sasl(MechanismAWSMSKIAM, func(s *Security) { s.AWS.SessionToken = "T" }), "aws_session_token: only with"},
		{"aws bad region", sasl(MechanismAWSMSKIAM, func(s *Security) { s.AWS.Region = "Frankfurt" }), "aws_region:"},
		{"aws with username", sasl(MechanismAWSMSKIAM, func(s *Security) { s.SASLUsername = "u" }), "sasl_username: set, but sasl_mechanism AWS_MSK_IAM"},
		{"aws with oauth", sasl(MechanismAWSMSKIAM, func(s *Security) { s.OAuth.ClientID = "id" }), "sasl_oauthbearer_client_id: set, but"},
		{"oauth", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth }), ""},
		{"oauth http loopback", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.TokenEndpointURL = "http://127.0.0.1:8181/token" }), ""},
		{"oauth no endpoint", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.TokenEndpointURL = "" }), "sasl_oauthbearer_token_endpoint_url: required"},
		{"oauth http", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.TokenEndpointURL = "http://login.example.com/t" }), "must be https"},
		{"oauth relative", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.TokenEndpointURL = "/token" }), "not an absolute URL"},
		{"oauth no client id", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.ClientID = "" }), "sasl_oauthbearer_client_id: required"},
		{"oauth no secret", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.ClientSecret = "" }), "sasl_oauthbearer_client_secret: required"},
		{"oauth bad extension key", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.Extensions = map[string]string{"logical_cluster": "x"} }), `key "logical_cluster": letters only`},
		{"oauth auth extension", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.Extensions = map[string]string{"auth": "x"} }), `key "auth": reserved`},
		{"oauth empty extension", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.OAuth.Extensions = map[string]string{"a": ""} }), `the value of "a"`},
		{"oauth with aws", sasl(MechanismOAuthBearer, func(s *Security) { s.OAuth = oauth; s.AWS.Region = "us-east-1" }), "aws_region: set, but"},
		{"plain with oauth", sasl(MechanismPlain, func(s *Security) { s.SASLUsername = "u"; s.OAuth.Scope = "x" }), "sasl_oauthbearer_scope: set, but sasl_mechanism PLAIN"},
		{"no sasl with aws", Security{Protocol: ProtocolSSL, AWS: AWSAuth{AccessKeyID: "A"}}, "aws_access_key_id: set, but security_protocol SSL"},
	} {
		err := Config{BootstrapServers: []string{"b-1.example:9098"}, Security: tc.sec}.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestSecurityRedactsNewSecrets: printing or logging a Security shows no
// AWS secret, session token or OAuth client secret.
func TestSecurityRedactsNewSecrets(t *testing.T) {
	s := Security{Protocol: ProtocolSASLSSL, SASLMechanism: MechanismOAuthBearer,
		AWS:   AWSAuth{AccessKeyID: "AKIA", SecretAccessKey: "aws-secret-value", SessionToken: "aws-token-value"},
		OAuth: OAuthAuth{ClientID: "id", ClientSecret: "oauth-secret-value", Extensions: testExtensions}}
	for _, out := range []string{s.String(), s.LogValue().String()} {
		for _, secret := range []string{"aws-secret-value", "aws-token-value", "oauth-secret-value"} {
			if strings.Contains(out, secret) {
				t.Errorf("%q shows %s", out, secret)
			}
		}
	}
}

// TestOAuthBearerClientsShareTokens: clients with the same credentials
// (a mirror's fetcher, admin client, metadata sync...) share one token
// rather than each asking the identity provider.
func TestOAuthBearerClientsShareTokens(t *testing.T) {
	is := kfakeauth.NewIssuer(t, "kmirror-client", "client-secret", time.Minute)
	c, g := oauthCluster(t, is, 0)
	for range 3 {
		if _, err := TopicPartitions(t.Context(), oauthConfig(c, is), testTimeout); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(is.Issued()); n != 1 || len(g.Auths()) < 3 {
		t.Fatalf("%d tokens issued for %d authentications of 3 clients, want 1", n, len(g.Auths()))
	}
	noRefusals(t, g)
}

// TestOAuthTokensRideThroughAProviderOutage: a refresh that fails keeps the
// last token while it has life left, and fails once it has not.
func TestOAuthTokensRideThroughAProviderOutage(t *testing.T) {
	is := kfakeauth.NewIssuer(t, "kmirror-client", "client-secret", time.Minute)
	tokens := NewOAuthTokens(OAuthAuth{TokenEndpointURL: is.URL, ClientID: is.ClientID, ClientSecret: is.Secret})
	first, err := tokens.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	is.SetFailing(true)
	tokens.refreshAt = time.Now() // due for a refresh
	if tok, err := tokens.Token(t.Context()); err != nil || tok.AccessToken != first.AccessToken {
		t.Fatalf("during the outage: %v, %v; want the last token", tok, err)
	}
	tokens.tok.Expiry = time.Now().Add(oauthMinLife / 2)
	if _, err := tokens.Token(t.Context()); err == nil || !strings.Contains(err.Error(), "temporarily_unavailable") {
		t.Fatalf("a token about to expire, the provider down: %v", err)
	}
	is.SetFailing(false)
	if tok, err := tokens.Token(t.Context()); err != nil || tok.AccessToken == first.AccessToken {
		t.Fatalf("after the outage: %v, %v; want a new token", tok, err)
	}
}
