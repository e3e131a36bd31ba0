package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/secretbox"
	"kmirror/internal/testing/testdb"
	"kmirror/service"
)

const (
	awsSecret   = "aws-secret-6c1e/9aQ"
	awsToken    = "aws-session-token-77f3"
	oauthSecret = "oauth-client-secret-41b2"
)

func awsSource() service.SourceInput {
	return service.SourceInput{BootstrapServers: "b-1.demo.abc.c2.kafka.us-east-1.amazonaws.com:9098", SecurityProtocol: "SASL_SSL",
		SASLMechanism: "AWS_MSK_IAM", AWSAccessKeyID: "AKIAKMIRROR", AWSSecretAccessKey: awsSecret, AWSSessionToken: awsToken,
		AWSRegion: "us-east-1"}
}

func oauthSource() service.SourceInput {
	return service.SourceInput{BootstrapServers: "pkc-1.us-west-2.aws.confluent.cloud:9092", SecurityProtocol: "SASL_SSL",
		SASLMechanism: "OAUTHBEARER", OAuthTokenEndpointURL: "https://login.example.com/oauth2/token", OAuthClientID: "kmirror",
		OAuthClientSecret: oauthSecret, OAuthScope: "kafka", OAuthExtensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}}
}

// noClearIn fails when a table that could hold a source secret holds one
// of secrets in clear.
func noClearIn(t *testing.T, pool *pgxpool.Pool, secrets ...string) {
	t.Helper()
	for _, table := range []string{"mirrors", "outbox", "events"} {
		var all string
		if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(x::text, '|'), '') FROM `+table+` x`).Scan(&all); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Fatalf("table %s holds %q in clear", table, s)
			}
		}
	}
}

// TestSASLMechanismSecretsAtRest: the AWS secret key and session token and
// the OAuth client secret are sealed like sasl_password: no table holds
// them in clear (the outbox's __mirror_state records say only that each
// is set), the data plane opens them, a rotation re-seals them, and a
// server without a key refuses them and writes nothing.
func TestSASLMechanismSecretsAtRest(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	key1, key2 := newBox(t), newBox(t)
	svc := newSecretsService(t, pool, key1)
	opts := service.WriteOpts{SkipConnectivityCheck: true}

	keyless := newSecretsService(t, pool, nil)
	for name, src := range map[string]service.SourceInput{"aws": awsSource(), "oauth": oauthSource()} {
		_, err := keyless.CreateMirror(ctx, service.MirrorInput{Name: name, Source: src}, opts)
		want := map[string]string{"aws": "source.aws_secret_access_key and source.aws_session_token",
			"oauth": "source.sasl_oauthbearer_client_secret"}[name]
		if !errors.Is(err, service.ErrSecretKeyRequired) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s without a key: %v, want %q named", name, err, want)
		}
	}
	if n := countRows(t, pool, "mirrors") + countRows(t, pool, "outbox"); n != 0 {
		t.Fatalf("refused creates wrote %d rows", n)
	}

	for name, src := range map[string]service.SourceInput{"aws": awsSource(), "oauth": oauthSource()} {
		m, err := svc.CreateMirror(ctx, service.MirrorInput{Name: name, Source: src}, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(m.Source)
		for _, s := range []string{awsSecret, awsToken, oauthSecret} {
			if strings.Contains(string(got), s) {
				t.Fatalf("%s: the mirror handed out holds a secret: %s", name, got)
			}
		}
	}
	noClearIn(t, pool, awsSecret, awsToken, oauthSecret)
	var sealed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM mirrors WHERE aws_secret_access_key LIKE 'kmsec:v1:%'
		AND aws_session_token LIKE 'kmsec:v1:%' OR sasl_oauthbearer_client_secret LIKE 'kmsec:v1:%'`).Scan(&sealed); err != nil || sealed != 2 {
		t.Fatalf("%d mirrors with sealed secrets (%v)", sealed, err)
	}
	var record string
	if err := pool.QueryRow(ctx, `SELECT value::text FROM outbox WHERE key = 'mirror/aws'`).Scan(&record); err != nil ||
		!strings.Contains(record, `"aws_secret_access_key_set": true`) || !strings.Contains(record, `"aws_session_token_set": true`) {
		t.Fatalf("the aws mirror's __mirror_state record %s (%v)", record, err)
	}
	m, err := svc.GetMirror(ctx, "oauth")
	if err != nil || !m.Source.OAuthClientSecretSet || m.Source.OAuthTokenEndpointURL != oauthSource().OAuthTokenEndpointURL ||
		!maps.Equal(m.Source.OAuthExtensions, oauthSource().OAuthExtensions) {
		t.Fatalf("GetMirror: %+v, %v", m.Source, err)
	}

	wantScope := "kafka"
	check := func(box *secretbox.Keyring) {
		t.Helper()
		aws := sourceConn(t, box, pool, "aws").Security
		oauth := sourceConn(t, box, pool, "oauth").Security
		if aws.AWS.SecretAccessKey != awsSecret || aws.AWS.SessionToken != awsToken || aws.AWS.AccessKeyID != "AKIAKMIRROR" ||
			oauth.OAuth.ClientSecret != oauthSecret || oauth.OAuth.Scope != wantScope || oauth.OAuth.Extensions["identityPoolId"] != "pool-2" {
			t.Fatalf("SourceConn: %+v / %+v", aws.AWS, oauth.OAuth)
		}
	}
	check(key1)

	// A patch of a non-secret field keeps the secrets sealed and usable.
	scope := "kafka admin"
	wantScope = scope
	if _, err := svc.UpdateMirror(ctx, "oauth", service.MirrorPatch{Source: &service.SourcePatch{OAuthScope: &scope}}, opts); err != nil {
		t.Fatal(err)
	}
	noClearIn(t, pool, awsSecret, awsToken, oauthSecret)
	if n, err := svc.RotateSecrets(ctx, key2); err != nil || n != 3 {
		t.Fatalf("rotate: %d, %v", n, err)
	}
	noClearIn(t, pool, awsSecret, awsToken, oauthSecret)
	check(key2)
	if _, err := newSecretsService(t, pool, key1).CheckSecrets(ctx); !errors.Is(err, service.ErrSecretKey) {
		t.Fatalf("the old key after the rotation: %v", err)
	}
}

// TestSASLMechanismValidation: bad mechanism settings are a validation
// error naming the field, and nothing is written.
func TestSASLMechanismValidation(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	svc := newClearSecretsService(t, pool)
	for _, tc := range []struct {
		name  string
		src   func(*service.SourceInput)
		field string
	}{
		{"no token endpoint", func(s *service.SourceInput) { s.OAuthTokenEndpointURL = "" }, "source.sasl_oauthbearer_token_endpoint_url"},
		{"http endpoint", func(s *service.SourceInput) { s.OAuthTokenEndpointURL = "http://login.example.com/t" }, "source.sasl_oauthbearer_token_endpoint_url"},
		{"no client id", func(s *service.SourceInput) { s.OAuthClientID = "" }, "source.sasl_oauthbearer_client_id"},
		{"no client secret", func(s *service.SourceInput) { s.OAuthClientSecret = "" }, "source.sasl_oauthbearer_client_secret"},
		{"bad extension", func(s *service.SourceInput) { s.OAuthExtensions = map[string]string{"pool_id": "x"} }, "source.sasl_oauthbearer_extensions"},
		{"oauth with password", func(s *service.SourceInput) { s.SASLPassword = "x" }, "source.sasl_password"},
		{"oauth with aws", func(s *service.SourceInput) { s.AWSRegion = "us-east-1" }, "source.aws_region"},
	} {
		src := oauthSource()
		tc.src(&src)
		_, err := svc.CreateMirror(context.Background(), service.MirrorInput{Name: "m", Source: src}, service.WriteOpts{SkipConnectivityCheck: true})
		var ve *service.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want a validation error naming %s", tc.name, err, tc.field)
		}
	}
	for _, tc := range []struct {
		name  string
		src   func(*service.SourceInput)
		field string
	}{
		{"key without secret", func(s *service.SourceInput) { s.AWSSecretAccessKey = "" }, "source.aws_secret_access_key"},
		{"token without keys", func(s *service.SourceInput) { s.AWSAccessKeyID, s.AWSSecretAccessKey = "", "" }, "source.aws_session_token"},
		{"bad region", func(s *service.SourceInput) { s.AWSRegion = "virginia" }, "source.aws_region"},
		{"aws with username", func(s *service.SourceInput) { s.SASLUsername = "u" }, "source.sasl_username"},
		{"aws on SSL", func(s *service.SourceInput) { s.SecurityProtocol, s.SASLMechanism = "SSL", "" }, "source.aws_access_key_id"},
	} {
		src := awsSource()
		tc.src(&src)
		_, err := svc.CreateMirror(context.Background(), service.MirrorInput{Name: "m", Source: src}, service.WriteOpts{SkipConnectivityCheck: true})
		var ve *service.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want a validation error naming %s", tc.name, err, tc.field)
		}
	}
	// The default credential chain: no keys at all.
	src := awsSource()
	src.AWSAccessKeyID, src.AWSSecretAccessKey, src.AWSSessionToken = "", "", ""
	if _, err := svc.CreateMirror(context.Background(), service.MirrorInput{Name: "chain", Source: src}, service.WriteOpts{SkipConnectivityCheck: true}); err != nil {
		t.Fatalf("the default chain: %v", err)
	}
	if n := countRows(t, pool, "mirrors"); n != 1 {
		t.Fatalf("%d mirrors, want only the valid one", n)
	}
}
