package service

import (
	"slices"

	"kmirror/repo"
)

// MirrorState says whether a mirror can run.
type MirrorState string

const (
	// MirrorReady: the mirror has every secret it was configured with.
	MirrorReady MirrorState = "ready"
	// MirrorNeedsCredentials: restored from __mirror_state, which never
	// carries secrets; its partitions and its metadata sync wait (they are
	// not leased, so none fails on authentication) until PATCH enters the
	// secrets listed in MissingCredentials again.
	MirrorNeedsCredentials MirrorState = "needs_credentials"
)

// The secrets a restored mirror may lack, by their source field names.
const (
	CredentialSASLPassword       = "sasl_password"
	CredentialTLSKey             = "tls_key_pem"
	CredentialAWSSecretAccessKey = "aws_secret_access_key"
	CredentialAWSSessionToken    = "aws_session_token"
	CredentialOAuthClientSecret  = "sasl_oauthbearer_client_secret"
	// The source Schema Registry's, by their paths under source.
	CredentialSchemaRegistryPassword    = "schema_registry.basic_auth_password"
	CredentialSchemaRegistryBearerToken = "schema_registry.bearer_token"
	CredentialSchemaRegistryTLSKey      = "schema_registry.tls_key_pem"
)

// missingCredentials lists the secrets a published source had set: a
// restore cannot bring them back.
func missingCredentials(src SourceRecord) []string {
	var out []string
	if src.SASLPasswordSet {
		out = append(out, CredentialSASLPassword)
	}
	if src.TLSKeySet {
		out = append(out, CredentialTLSKey)
	}
	if src.AWSSecretAccessKeySet {
		out = append(out, CredentialAWSSecretAccessKey)
	}
	if src.AWSSessionTokenSet {
		out = append(out, CredentialAWSSessionToken)
	}
	if src.OAuthClientSecretSet {
		out = append(out, CredentialOAuthClientSecret)
	}
	if r := src.SchemaRegistry; r != nil {
		if r.BasicAuthPasswordSet {
			out = append(out, CredentialSchemaRegistryPassword)
		}
		if r.BearerTokenSet {
			out = append(out, CredentialSchemaRegistryBearerToken)
		}
		if r.TLSKeyPEMSet {
			out = append(out, CredentialSchemaRegistryTLSKey)
		}
	}
	return out
}

// stillMissing is what of a mirror's missing secrets a patch left missing:
// one stays missing while it is empty and still used (a SASL password under
// a SASL protocol, a TLS key beside a client certificate, an AWS secret key
// beside its key id, a client secret under OAUTHBEARER, a registry password
// beside its username, a registry key beside its certificate). A session
// token goes with its secret key: new keys entered without one need none. A
// registry's bearer token stays missing while the registry is named and
// takes no basic auth instead.
func stillMissing(m repo.Mirror) []string {
	return slices.DeleteFunc(slices.Clone(m.MissingCredentials), func(c string) bool {
		switch c {
		case CredentialSASLPassword:
			return m.SASLPassword != "" || m.SASLMechanism == ""
		case CredentialTLSKey:
			return m.TLSKeyPEM != "" || m.TLSCertPEM == ""
		case CredentialAWSSecretAccessKey:
			return m.AWSSecretAccessKey != "" || m.AWSAccessKeyID == ""
		case CredentialAWSSessionToken:
			return m.AWSSessionToken != "" || m.AWSSecretAccessKey != "" || m.AWSAccessKeyID == ""
		case CredentialOAuthClientSecret:
			return m.OAuthClientSecret != "" || m.SASLMechanism != "OAUTHBEARER"
		case CredentialSchemaRegistryPassword:
			return m.SchemaRegistryPassword != "" || m.SchemaRegistryUsername == ""
		case CredentialSchemaRegistryBearerToken:
			return m.SchemaRegistryBearerToken != "" || len(m.SchemaRegistryURLs) == 0 || m.SchemaRegistryUsername != ""
		case CredentialSchemaRegistryTLSKey:
			return m.SchemaRegistryTLSKeyPEM != "" || m.SchemaRegistryTLSCertPEM == ""
		}
		return true
	})
}
