package main

import (
	"errors"
	"fmt"
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
  KMIRROR_DESTINATION_SCHEMA_REGISTRY_TLS_SERVER_NAME  the name to verify the registry's certificate against
`

const registryEnv = "KMIRROR_DESTINATION_SCHEMA_REGISTRY_"

// registryFields names, in schemaregistry's errors (which spell the fields
// as the REST API does), the settings as the server takes them.
var registryFields = strings.NewReplacer(
	"basic_auth_username", registryEnv+"USERNAME",
	"basic_auth_password", registryEnv+"PASSWORD",
	"bearer_token", registryEnv+"BEARER_TOKEN",
	"tls_ca_pem", registryEnv+"TLS_CA_FILE",
	"tls_cert_pem", registryEnv+"TLS_CERT_FILE",
	"tls_key_pem", registryEnv+"TLS_KEY_FILE",
	"tls_server_name", registryEnv+"TLS_SERVER_NAME",
)

// destinationRegistryFromEnv builds the deployment's destination Schema
// Registry connection from urls (--destination-schema-registry-url, comma
// separated) and the KMIRROR_DESTINATION_SCHEMA_REGISTRY_* variables,
// reading the TLS files, and validates it. It returns nil when urls is
// empty, and an error when a setting is given without a URL: a registry
// half configured is refused at start, not found out at the first sync.
func destinationRegistryFromEnv(urls string) (*schemaregistry.Config, error) {
	c := schemaregistry.Config{
		Username:      os.Getenv(registryEnv + "USERNAME"),
		Password:      os.Getenv(registryEnv + "PASSWORD"),
		BearerToken:   os.Getenv(registryEnv + "BEARER_TOKEN"),
		TLSServerName: os.Getenv(registryEnv + "TLS_SERVER_NAME"),
	}
	for u := range strings.SplitSeq(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			c.URLs = append(c.URLs, u)
		}
	}
	files := []struct {
		env string
		dst *string
	}{
		{registryEnv + "TLS_CA_FILE", &c.TLSCAPEM},
		{registryEnv + "TLS_CERT_FILE", &c.TLSCertPEM},
		{registryEnv + "TLS_KEY_FILE", &c.TLSKeyPEM},
	}
	if len(c.URLs) == 0 {
		for _, name := range []string{"USERNAME", "PASSWORD", "BEARER_TOKEN", "TLS_SERVER_NAME", "TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"} {
			if os.Getenv(registryEnv+name) != "" {
				return nil, fmt.Errorf("%s%s is set, but no destination Schema Registry is: set --destination-schema-registry-url (KMIRROR_DESTINATION_SCHEMA_REGISTRY_URL) too, or unset it", registryEnv, name)
			}
		}
		return nil, nil
	}
	for _, f := range files {
		if path := os.Getenv(f.env); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.env, err)
			}
			*f.dst = string(b)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, errors.New("destination Schema Registry (--destination-schema-registry-url, KMIRROR_DESTINATION_SCHEMA_REGISTRY_*): " +
			registryFields.Replace(err.Error()))
	}
	return &c, nil
}
