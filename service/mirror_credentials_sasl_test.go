package service

import (
	"encoding/json"
	"slices"
	"testing"

	"kmirror/repo"
)

// TestTokenMechanismCredentials: a published AWS_MSK_IAM or OAUTHBEARER
// source (its __mirror_state record, as restore reads it) says which
// secrets it had, a restore lists them as missing, and each stays missing
// until set again or no longer used.
func TestTokenMechanismCredentials(t *testing.T) {
	aws := repo.Mirror{Name: "aws", Source: repo.Source{SASLMechanism: "AWS_MSK_IAM", AWSAccessKeyID: "AKIA",
		AWSSecretAccessKey: "s", AWSSessionToken: "t", AWSRegion: "us-east-1"}}
	oauth := repo.Mirror{Name: "oauth", Source: repo.Source{SASLMechanism: "OAUTHBEARER", OAuthTokenEndpointURL: "https://idp/token",
		OAuthClientID: "c", OAuthClientSecret: "s", OAuthExtensions: map[string]string{"logicalCluster": "lkc-1"}}}
	chain := repo.Mirror{Name: "chain", Source: repo.Source{SASLMechanism: "AWS_MSK_IAM"}}
	for _, tc := range []struct {
		m    repo.Mirror
		want []string
	}{
		{aws, []string{CredentialAWSSecretAccessKey, CredentialAWSSessionToken}},
		{oauth, []string{CredentialOAuthClientSecret}},
		{chain, nil},
	} {
		b, err := json.Marshal(mirrorRecord(tc.m))
		if err != nil {
			t.Fatal(err)
		}
		var rec MirrorRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		if got := missingCredentials(rec.Source); !slices.Equal(got, tc.want) {
			t.Errorf("%s: missing %v, want %v (record %s)", tc.m.Name, got, tc.want, b)
		}
	}

	restored := func(m repo.Mirror, missing ...string) repo.Mirror {
		m.AWSSecretAccessKey, m.AWSSessionToken, m.OAuthClientSecret = "", "", ""
		m.MissingCredentials = missing
		return m
	}
	for _, tc := range []struct {
		name string
		m    repo.Mirror
		want []string
	}{
		{"aws, nothing set yet", restored(aws, CredentialAWSSecretAccessKey, CredentialAWSSessionToken),
			[]string{CredentialAWSSecretAccessKey, CredentialAWSSessionToken}},
		{"aws, new keys without a token", func() repo.Mirror {
			m := restored(aws, CredentialAWSSecretAccessKey, CredentialAWSSessionToken)
			m.AWSSecretAccessKey = "new"
			return m
		}(), []string{}},
		{"aws, now the default chain", func() repo.Mirror {
			m := restored(aws, CredentialAWSSecretAccessKey, CredentialAWSSessionToken)
			m.AWSAccessKeyID = ""
			return m
		}(), []string{}},
		{"oauth, nothing set yet", restored(oauth, CredentialOAuthClientSecret), []string{CredentialOAuthClientSecret}},
		{"oauth, secret set", func() repo.Mirror {
			m := restored(oauth, CredentialOAuthClientSecret)
			m.OAuthClientSecret = "new"
			return m
		}(), []string{}},
	} {
		if got := stillMissing(tc.m); !slices.Equal(got, tc.want) {
			t.Errorf("%s: still missing %v, want %v", tc.name, got, tc.want)
		}
	}
}
