package api_test

import (
	"net/http"
	"strings"
	"testing"

	"kmirror/api"
)

// TestTokenMechanismSecretsWriteOnly: a source that signs in with
// OAUTHBEARER or AWS_MSK_IAM is created, read and patched over the API
// without any response carrying its secrets (only *_set); bad settings
// are a 400 naming the field, and change nothing.
func TestTokenMechanismSecretsWriteOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const clientSecret, awsSecret = "oauth-secret-never-returned-3f1", "aws-secret-never-returned-9b2"
	oauth := map[string]any{"bootstrap_servers": e.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
		"sasl_oauthbearer_token_endpoint_url": "https://login.example.com/oauth2/token", "sasl_oauthbearer_client_id": "kmirror",
		"sasl_oauthbearer_client_secret": clientSecret, "sasl_oauthbearer_scope": "kafka",
		"sasl_oauthbearer_extensions": map[string]string{"logicalCluster": "lkc-1"}}
	aws := map[string]any{"bootstrap_servers": e.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM",
		"aws_access_key_id": "AKIAAPITEST", "aws_secret_access_key": awsSecret, "aws_region": "eu-north-1"}
	noSecret := func(r response) {
		t.Helper()
		for _, s := range []string{clientSecret, awsSecret} {
			if strings.Contains(string(r.body), s) {
				t.Fatalf("a response carries a secret: %s", r.body)
			}
		}
	}
	for name, src := range map[string]map[string]any{"oauth": oauth, "aws": aws} {
		r := e.do(t, http.MethodPost, "/v1/mirrors?skip_connectivity_check=true", map[string]any{"name": name, "source": src})
		var m api.Mirror
		ok(t, r, http.StatusCreated, &m)
		noSecret(r)
		switch name {
		case "oauth":
			if !m.Source.OAuthClientSecretSet || m.Source.OAuthClientID != "kmirror" || m.Source.OAuthExtensions["logicalCluster"] != "lkc-1" ||
				m.Source.SASLMechanism != api.SASLMechanismOAuthBearer {
				t.Fatalf("oauth source %+v", m.Source)
			}
		case "aws":
			if !m.Source.AWSSecretAccessKeySet || m.Source.AWSSessionTokenSet || m.Source.AWSAccessKeyID != "AKIAAPITEST" ||
				m.Source.AWSRegion != "eu-north-1" {
				t.Fatalf("aws source %+v", m.Source)
			}
		}
		noSecret(e.do(t, http.MethodGet, "/v1/mirrors/"+name, nil))
	}
	noSecret(e.do(t, http.MethodGet, "/v1/mirrors", nil))

	before := e.snapshot(t)
	for _, tc := range []struct {
		mirror string
		patch  map[string]any
		field  string
	}{
		{"oauth", map[string]any{"sasl_oauthbearer_token_endpoint_url": "http://login.example.com/token"}, "source.sasl_oauthbearer_token_endpoint_url: must be https"},
		{"oauth", map[string]any{"sasl_oauthbearer_token_endpoint_url": ""}, "source.sasl_oauthbearer_token_endpoint_url: required"},
		{"oauth", map[string]any{"sasl_oauthbearer_extensions": map[string]string{"auth": "x"}}, "source.sasl_oauthbearer_extensions"},
		{"aws", map[string]any{"aws_secret_access_key": ""}, "source.aws_secret_access_key: required with aws_access_key_id"},
		{"aws", map[string]any{"sasl_username": "u"}, "source.sasl_username: not used by sasl_mechanism AWS_MSK_IAM"},
	} {
		r := e.do(t, http.MethodPatch, "/v1/mirrors/"+tc.mirror+"?skip_connectivity_check=true", map[string]any{"source": tc.patch})
		wantProblem(t, r, http.StatusBadRequest, "validation", tc.field)
		noSecret(r)
	}
	e.unchanged(t, before)

	// A patch that changes the scope keeps the secret, still unreturned.
	r := e.do(t, http.MethodPatch, "/v1/mirrors/oauth?skip_connectivity_check=true", map[string]any{"source": map[string]any{"sasl_oauthbearer_scope": "kafka admin"}})
	var m api.Mirror
	ok(t, r, http.StatusOK, &m)
	noSecret(r)
	if !m.Source.OAuthClientSecretSet || m.Source.OAuthScope != "kafka admin" {
		t.Fatalf("patched source %+v", m.Source)
	}
}
