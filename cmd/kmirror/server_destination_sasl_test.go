package main

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"

	"kmirror/internal/kafka/kafkaconn"
)

// TestDestinationSASLFromEnv: the destination's AWS_MSK_IAM and OAUTHBEARER
// settings come from KMIRROR_DESTINATION_*, are listed by --help, and bad
// extensions stop the start with the variable's name.
func TestDestinationSASLFromEnv(t *testing.T) {
	for k, v := range map[string]string{
		"KMIRROR_DESTINATION_SECURITY_PROTOCOL":                   "SASL_SSL",
		"KMIRROR_DESTINATION_SASL_MECHANISM":                      "OAUTHBEARER",
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL": "https://login.example.com/oauth2/token",
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_ID":          "kmirror",
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_SECRET":      "s3cret",
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_SCOPE":              "kafka",
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS":         "logicalCluster=lkc-1, identityPoolId=pool-2",
	} {
		t.Setenv(k, v)
	}
	c, err := destinationFromEnv("pkc-1.example:9092")
	if err != nil {
		t.Fatal(err)
	}
	want := kafkaconn.OAuthAuth{TokenEndpointURL: "https://login.example.com/oauth2/token", ClientID: "kmirror",
		ClientSecret: "s3cret", Scope: "kafka"}
	got := c.Security.OAuth
	if !maps.Equal(got.Extensions, map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}) {
		t.Fatalf("extensions %v", got.Extensions)
	}
	if got.TokenEndpointURL != want.TokenEndpointURL || got.ClientID != want.ClientID || got.ClientSecret != want.ClientSecret ||
		got.Scope != want.Scope {
		t.Fatalf("oauth %+v", got)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	t.Setenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS", "logical_cluster=x")
	if _, err := destinationFromEnv("h:9092"); err == nil || !strings.Contains(err.Error(), "KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS") {
		t.Fatalf("bad extension: %v", err)
	}
	t.Setenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS", "")

	t.Setenv("KMIRROR_DESTINATION_SASL_MECHANISM", "AWS_MSK_IAM")
	for _, k := range []string{"TOKEN_ENDPOINT_URL", "CLIENT_ID", "CLIENT_SECRET", "SCOPE"} {
		t.Setenv("KMIRROR_DESTINATION_SASL_OAUTHBEARER_"+k, "")
	}
	t.Setenv("KMIRROR_DESTINATION_AWS_ACCESS_KEY_ID", "AKIA")
	t.Setenv("KMIRROR_DESTINATION_AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("KMIRROR_DESTINATION_AWS_SESSION_TOKEN", "token")
	t.Setenv("KMIRROR_DESTINATION_AWS_REGION", "eu-west-1")
	if c, err = destinationFromEnv("b-1.x.kafka.eu-west-1.amazonaws.com:9098"); err != nil || c.Validate() != nil ||
		c.Security.AWS != (kafkaconn.AWSAuth{AccessKeyID: "AKIA", SecretAccessKey: "secret", SessionToken: "token", Region: "eu-west-1"}) {
		t.Fatalf("aws: %+v %v %v", c.Security.AWS, err, c.Validate())
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"server", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"KMIRROR_DESTINATION_AWS_SECRET_ACCESS_KEY", "KMIRROR_DESTINATION_AWS_REGION",
		"KMIRROR_DESTINATION_SASL_OAUTHBEARER_CLIENT_SECRET", "KMIRROR_DESTINATION_SASL_OAUTHBEARER_EXTENSIONS", "AWS_MSK_IAM or OAUTHBEARER"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("server --help lacks %s", want)
		}
	}
}
