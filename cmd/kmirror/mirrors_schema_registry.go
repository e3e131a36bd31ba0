package main

import (
	"flag"
	"strings"

	"kmirror/openapi/client"
)

// mirrorsSchemaRegistryFlags are --create's settings of the source's
// Schema Registry. Its password and bearer token come from files or the
// environment, never from the command line, as --sasl-password-file's does.
type mirrorsSchemaRegistryFlags struct {
	urls            string
	username        string
	passwordFile    string
	bearerTokenFile string
	caFile          string
	certFile        string
	keyFile         string
	serverName      string
}

// mirrorsSchemaRegistryFlagNames are the flags above, all for --create.
var mirrorsSchemaRegistryFlagNames = []string{"schema-registry-url", "schema-registry-username",
	"schema-registry-password-file", "schema-registry-bearer-token-file", "schema-registry-ca-file",
	"schema-registry-cert-file", "schema-registry-key-file", "schema-registry-server-name"}

func (f *mirrorsSchemaRegistryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.urls, "schema-registry-url", "", "the source's Schema Registry, URL[,URL...] (http:// or https://), whose subjects the mirror copies")
	fs.StringVar(&f.username, "schema-registry-username", "", "Schema Registry basic auth username (an API key, for instance)")
	fs.StringVar(&f.passwordFile, "schema-registry-password-file", "", "file holding the Schema Registry basic auth password (else KMIRROR_SOURCE_SCHEMA_REGISTRY_PASSWORD, read with --schema-registry-username)")
	fs.StringVar(&f.bearerTokenFile, "schema-registry-bearer-token-file", "", "file holding a Schema Registry bearer token, instead of basic auth (else KMIRROR_SOURCE_SCHEMA_REGISTRY_BEARER_TOKEN, read without --schema-registry-username)")
	fs.StringVar(&f.caFile, "schema-registry-ca-file", "", "PEM file of CA certificates that sign the Schema Registry's certificate (default: the system's)")
	fs.StringVar(&f.certFile, "schema-registry-cert-file", "", "PEM client certificate for the Schema Registry")
	fs.StringVar(&f.keyFile, "schema-registry-key-file", "", "PEM client key for the Schema Registry")
	fs.StringVar(&f.serverName, "schema-registry-server-name", "", "server name to verify the Schema Registry's certificate against (default: the URL's host)")
}

// given says whether any of the flags is set, so that a registry's other
// flags without --schema-registry-url reach the server and are refused
// there by name.
func (f *mirrorsSchemaRegistryFlags) given() bool {
	return *f != mirrorsSchemaRegistryFlags{}
}

// apply sets src's registry from the flags, reading the files, and the
// environment only for a registry that is named.
func (f *mirrorsSchemaRegistryFlags) apply(src *client.SourceSpec) error {
	if !f.given() {
		return nil
	}
	r := &client.SchemaRegistrySpec{Urls: []string{}, BasicAuthUsername: ptrOrNil(f.username),
		TlsServerName: ptrOrNil(f.serverName)}
	for _, u := range strings.Split(f.urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			r.Urls = append(r.Urls, u)
		}
	}
	named := len(r.Urls) > 0
	if err := readSecrets([]secretSource{
		{"schema-registry-password-file", f.passwordFile, "KMIRROR_SOURCE_SCHEMA_REGISTRY_PASSWORD",
			named && f.username != "", &r.BasicAuthPassword},
		{"schema-registry-bearer-token-file", f.bearerTokenFile, "KMIRROR_SOURCE_SCHEMA_REGISTRY_BEARER_TOKEN",
			named && f.username == "", &r.BearerToken},
	}); err != nil {
		return err
	}
	for _, p := range []struct {
		flag, path string
		dst        **string
	}{
		{"schema-registry-ca-file", f.caFile, &r.TlsCaPem},
		{"schema-registry-cert-file", f.certFile, &r.TlsCertPem},
		{"schema-registry-key-file", f.keyFile, &r.TlsKeyPem},
	} {
		if p.path == "" {
			continue
		}
		pem, err := readSecretFile(p.flag, p.path)
		if err != nil {
			return err
		}
		*p.dst = ptr(pem)
	}
	src.SchemaRegistry = r
	return nil
}

// schemaRegistryLine is describe's line about a mirror's source Schema
// Registry (its URLs and how kmirror signs in, never a secret), or "".
func schemaRegistryLine(name string, r *client.SchemaRegistryView) string {
	if r == nil {
		return ""
	}
	var auth []string
	switch {
	case r.BasicAuthUsername != nil && *r.BasicAuthUsername != "":
		auth = append(auth, "basic auth as "+*r.BasicAuthUsername)
	case r.BearerTokenSet:
		auth = append(auth, "bearer token")
	}
	if r.TlsKeyPemSet {
		auth = append(auth, "client certificate")
	}
	line := "Mirror " + name + " schema registry: " + strings.Join(r.Urls, ",")
	if len(auth) > 0 {
		line += " (" + strings.Join(auth, ", ") + ")"
	}
	return line
}

func init() {
	for _, name := range mirrorsSchemaRegistryFlagNames {
		mirrorsFlagActions[name] = []string{"create"}
	}
}
