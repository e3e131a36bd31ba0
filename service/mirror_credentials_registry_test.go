package service

import (
	"encoding/json"
	"slices"
	"testing"

	"kmirror/repo"
)

// TestSchemaRegistryCredentials: a published source's registry says which
// of its secrets it had, a restore lists them as missing, and each stays
// missing until set again or no longer used.
func TestSchemaRegistryCredentials(t *testing.T) {
	basic := repo.Mirror{Name: "basic", Source: repo.Source{SchemaRegistryURLs: []string{"https://r:8081"},
		SchemaRegistryUsername: "u", SchemaRegistryPassword: "p", SchemaRegistryTLSCertPEM: "cert", SchemaRegistryTLSKeyPEM: "key"}}
	bearer := repo.Mirror{Name: "bearer", Source: repo.Source{SchemaRegistryURLs: []string{"https://r:8081"},
		SchemaRegistryBearerToken: "t"}}
	anonymous := repo.Mirror{Name: "anonymous", Source: repo.Source{SchemaRegistryURLs: []string{"https://r:8081"}}}
	for _, tc := range []struct {
		m    repo.Mirror
		want []string
	}{
		{basic, []string{CredentialSchemaRegistryPassword, CredentialSchemaRegistryTLSKey}},
		{bearer, []string{CredentialSchemaRegistryBearerToken}},
		{anonymous, nil},
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

	restored := func(m repo.Mirror, edit func(*repo.Mirror)) repo.Mirror {
		m.SchemaRegistryPassword, m.SchemaRegistryBearerToken, m.SchemaRegistryTLSKeyPEM = "", "", ""
		m.MissingCredentials = []string{CredentialSchemaRegistryPassword, CredentialSchemaRegistryBearerToken,
			CredentialSchemaRegistryTLSKey}
		edit(&m)
		return m
	}
	for _, tc := range []struct {
		name string
		m    repo.Mirror
		want []string
	}{
		{"basic, nothing set yet", restored(basic, func(*repo.Mirror) {}),
			[]string{CredentialSchemaRegistryPassword, CredentialSchemaRegistryTLSKey}},
		{"basic, password and key set", restored(basic, func(m *repo.Mirror) {
			m.SchemaRegistryPassword, m.SchemaRegistryTLSKeyPEM = "p", "k"
		}), []string{}},
		{"bearer, nothing set yet", restored(bearer, func(*repo.Mirror) {}), []string{CredentialSchemaRegistryBearerToken}},
		{"bearer, token set", restored(bearer, func(m *repo.Mirror) { m.SchemaRegistryBearerToken = "t" }), []string{}},
		{"bearer, now basic auth", restored(bearer, func(m *repo.Mirror) {
			m.SchemaRegistryUsername, m.SchemaRegistryPassword = "u", "p"
		}), []string{}},
		{"registry removed", restored(basic, func(m *repo.Mirror) { m.Source = repo.Source{} }), []string{}},
	} {
		if got := stillMissing(tc.m); !slices.Equal(got, tc.want) {
			t.Errorf("%s: still missing %v, want %v", tc.name, got, tc.want)
		}
	}
}
