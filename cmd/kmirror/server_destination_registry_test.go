package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/testing/testcert"
)

// clearRegistryEnv unsets every KMIRROR_DESTINATION_SCHEMA_REGISTRY_*
// variable for the test.
func clearRegistryEnv(t *testing.T) {
	for _, name := range []string{"URL", "USERNAME", "PASSWORD", "BEARER_TOKEN", "TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE", "TLS_SERVER_NAME"} {
		t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+name, "")
	}
}

// TestDestinationRegistryFromEnv: the destination Schema Registry comes from
// --destination-schema-registry-url and KMIRROR_DESTINATION_SCHEMA_REGISTRY_*,
// its TLS files are read, its secrets are not logged, and --help lists the
// variables.
func TestDestinationRegistryFromEnv(t *testing.T) {
	clearRegistryEnv(t)
	if c, err := destinationRegistryFromEnv(""); err != nil || c != nil {
		t.Fatalf("no URL: %+v, %v; want nil, nil", c, err)
	}
	if c, err := destinationRegistryFromEnv(" , "); err != nil || c != nil {
		t.Fatalf("blank URLs: %+v, %v; want nil, nil", c, err)
	}

	c, err := destinationRegistryFromEnv("http://sr-1:8081, http://sr-2:8081")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.URLs, []string{"http://sr-1:8081", "http://sr-2:8081"}) || c.Username != "" {
		t.Fatalf("plain: %+v", c)
	}

	certPEM, keyPEM := testcert.SelfSigned(t)
	dir := t.TempDir()
	for name, text := range map[string]string{"ca.pem": certPEM, "cert.pem": certPEM, "key.pem": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+"USERNAME", "api-key")
	t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+"PASSWORD", "api-s3cret")
	t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+"TLS_CA_FILE", filepath.Join(dir, "ca.pem"))
	t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+"TLS_CERT_FILE", filepath.Join(dir, "cert.pem"))
	t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+"TLS_KEY_FILE", filepath.Join(dir, "key.pem"))
	t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+"TLS_SERVER_NAME", "registry.example")
	c, err = destinationRegistryFromEnv("https://psrc-1.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.Username != "api-key" || c.Password != "api-s3cret" || c.TLSCAPEM != certPEM || c.TLSCertPEM != certPEM ||
		c.TLSKeyPEM != keyPEM || c.TLSServerName != "registry.example" {
		t.Fatalf("with auth and TLS: %s", c)
	}
	if s := c.String(); strings.Contains(s, "api-s3cret") || strings.Contains(s, "PRIVATE KEY") {
		t.Errorf("the config prints a secret: %s", s)
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"server", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-destination-schema-registry-url", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL",
		"KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD",
		"KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE",
		"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CERT_FILE", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_KEY_FILE",
		"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_SERVER_NAME"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("server --help lacks %s", want)
		}
	}
}

// TestDestinationRegistryErrors: a bad setting stops the start with an
// error that names the flag or variable to fix, and never quotes a secret.
func TestDestinationRegistryErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		url  string
		env  map[string]string
		want []string
	}{
		{"a setting without a URL", "", map[string]string{"USERNAME": "u", "PASSWORD": "p4ss"},
			[]string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME is set", "--destination-schema-registry-url"}},
		{"a bearer token without a URL", "", map[string]string{"BEARER_TOKEN": "t0k"},
			[]string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN is set"}},
		{"no scheme", "registry:8081", nil, []string{"--destination-schema-registry-url", "http:// or https://"}},
		{"credentials in the URL", "https://u:p4ss@registry:8081", nil, []string{"credentials", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME"}},
		{"a user without a password", "https://registry", map[string]string{"USERNAME": "u"},
			[]string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD: required with KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME"}},
		{"basic and bearer", "https://registry", map[string]string{"USERNAME": "u", "PASSWORD": "p4ss", "BEARER_TOKEN": "t0k"},
			[]string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME and KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN"}},
		{"a missing CA file", "https://registry", map[string]string{"TLS_CA_FILE": filepath.Join(dir, "absent.pem")},
			[]string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE", "no such file"}},
		{"a CA file that holds no certificate", "https://registry", map[string]string{"TLS_CA_FILE": notPEM},
			[]string{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE: no BEGIN CERTIFICATE"}},
		{"TLS over http", "http://registry", map[string]string{"TLS_SERVER_NAME": "registry.example"},
			[]string{"no url is https://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearRegistryEnv(t)
			for k, v := range tc.env {
				t.Setenv("KMIRROR_DESTINATION_SCHEMA_REGISTRY_"+k, v)
			}
			c, err := destinationRegistryFromEnv(tc.url)
			if err == nil {
				t.Fatalf("accepted: %s", c)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "p4ss") || strings.Contains(err.Error(), "t0k") {
				t.Errorf("error %q quotes a secret", err)
			}
		})
	}
}

// TestServerRefusesABadDestinationRegistry: `kmirror server` stops before it
// opens anything, and a config built in code (kmirror dev's) is validated
// too.
func TestServerRefusesABadDestinationRegistry(t *testing.T) {
	clearRegistryEnv(t)
	t.Setenv("KMIRROR_DATABASE_URL", "postgres://unused")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"server", "--destination-schema-registry-url", "ftp://registry"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "destination Schema Registry") || !strings.Contains(errOut.String(), "http:// or https://") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}

	cfg := serverConfig{DatabaseURL: "postgres://unused", Listen: "127.0.0.1:0", LeaseTTL: 15 * time.Second,
		LeaseRenewInterval: 5 * time.Second, DeliveryTimeout: time.Second,
		DestinationRegistry: &schemaregistry.Config{URLs: []string{"http://registry"}, Username: "u"}}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "destination Schema Registry") {
		t.Fatalf("validate: %v", err)
	}
	cfg.DestinationRegistry.Password = "p"
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDestinationRegistryLogged: the start's log line names the registry's
// URLs and whether it has credentials, never the credentials.
func TestDestinationRegistryLogged(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	logDestinationRegistry(log, &schemaregistry.Config{URLs: []string{"https://sr-1:8081", "https://sr-2:8081"},
		Username: "api-key", Password: "api-s3cret"})
	logDestinationRegistry(log, nil)
	out := buf.String()
	for _, want := range []string{`"msg":"destination Schema Registry configured"`, `"urls":"https://sr-1:8081,https://sr-2:8081"`,
		`"basic_auth_username":"api-key"`, `"basic_auth_password":"[redacted]"`, `"msg":"no destination Schema Registry configured`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "api-s3cret") {
		t.Errorf("the log holds the password:\n%s", out)
	}
}
