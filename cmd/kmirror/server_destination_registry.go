package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"kmirror/internal/kafka/schemaregistry"
)

// serverEnvRegistry lists the destination Schema Registry's settings other
// than its URL, environment only like the destination cluster's security.
const serverEnvRegistry = `  KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME      the destination Schema Registry's basic auth user (an API key)
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD      its password (the API secret)
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN  a bearer token instead of basic auth
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE   CA certificates (PEM) to trust for the registry
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CERT_FILE client certificate (PEM)
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_KEY_FILE  its private key (PEM)
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_SERVER_NAME the name to verify the registry's certificate against
`

// registryFields names, in schemaregistry's errors (which spell the fields
// as the REST API does), the settings as the server takes them. The names
// are written out whole, here and below, so a search for one finds where it
// is read (the chart's check does).
var registryFields = strings.NewReplacer(
	"basic_auth_username", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME",
	"basic_auth_password", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD",
	"bearer_token", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN",
	"tls_ca_pem", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE",
	"tls_cert_pem", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CERT_FILE",
	"tls_key_pem", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_KEY_FILE",
	"tls_server_name", "KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_SERVER_NAME",
)

// destinationRegistryFromEnv builds the deployment's destination Schema
// Registry connection from urls (--destination-schema-registry-url, comma
// separated) and the KMIRROR_DESTINATION_SCHEMA_REGISTRY_* variables,
// reading the TLS files, and validates it. It returns nil when urls is
// empty, and an error when a setting is given without a URL: a registry
// half configured is refused at start, not found out at the first sync.
func destinationRegistryFromEnv(urls string) (*schemaregistry.Config, error) {
	var c schemaregistry.Config
	settings := []struct {
		env  string
		dst  *string
		file bool // the variable names a file; dst gets its text
	}{
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_USERNAME", &c.Username, false},
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_PASSWORD", &c.Password, false},
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_BEARER_TOKEN", &c.BearerToken, false},
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_SERVER_NAME", &c.TLSServerName, false},
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CA_FILE", &c.TLSCAPEM, true},
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_CERT_FILE", &c.TLSCertPEM, true},
		{"KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_KEY_FILE", &c.TLSKeyPEM, true},
	}
	for u := range strings.SplitSeq(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.URLs = append(c.URLs, u)
		}
	}
	for _, s := range settings {
		v := os.Getenv(s.env)
		switch {
		case v == "":
			continue
		case len(c.URLs) == 0:
			return nil, fmt.Errorf("%s is set, but no destination Schema Registry is: set --destination-schema-registry-url (KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL) too, or unset it", s.env)
		case !s.file:
			*s.dst = v
			continue
		}
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.env, err)
		}
		*s.dst = string(b)
	}
	if len(c.URLs) == 0 {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, errors.New("destination Schema Registry (--destination-schema-registry-url, KMIRROR_DESTINATION_SCHEMA_REGISTRY_*): " +
			registryFields.Replace(err.Error()))
	}
	return &c, nil
}

// logDestinationRegistry says at start whether the deployment has a
// destination Schema Registry, with its URLs and without its secrets
// (Config's LogValue).
func logDestinationRegistry(log *slog.Logger, c *schemaregistry.Config) {
	if c == nil {
		log.Info("no destination Schema Registry configured (--destination-schema-registry-url): no mirror copies schemas")
		return
	}
	log.Info("destination Schema Registry configured", "schema_registry", *c)
}
