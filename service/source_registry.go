package service

import (
	"slices"
	"strings"

	"kmirror/internal/kafka/schemaregistry"
	"kmirror/repo"
)

// SchemaRegistryRecord is a source Schema Registry without its secrets,
// with the API's field names.
type SchemaRegistryRecord struct {
	URLs                 []string `json:"urls"`
	BasicAuthUsername    string   `json:"basic_auth_username,omitempty"`
	BasicAuthPasswordSet bool     `json:"basic_auth_password_set,omitempty"`
	BearerTokenSet       bool     `json:"bearer_token_set,omitempty"`
	TLSCAPEM             string   `json:"tls_ca_pem,omitempty"`
	TLSCertPEM           string   `json:"tls_cert_pem,omitempty"`
	TLSKeyPEMSet         bool     `json:"tls_key_pem_set,omitempty"`
	TLSServerName        string   `json:"tls_server_name,omitempty"`
}

// SchemaRegistryPatch replaces the registry fields that are non-nil. URLs
// set to an empty list removes the registry: every other field must then
// be nil or empty, and all of them are cleared.
type SchemaRegistryPatch struct {
	URLs *[]string
	BasicAuthUsername, BasicAuthPassword, BearerToken,
	TLSCAPEM, TLSCertPEM, TLSKeyPEM, TLSServerName *string
}

// apply patches src's registry fields.
func (p *SchemaRegistryPatch) apply(src *repo.Source) {
	if p == nil {
		return
	}
	if p.URLs != nil && len(*p.URLs) == 0 {
		src.SchemaRegistryURLs = nil
		src.SchemaRegistryUsername, src.SchemaRegistryPassword, src.SchemaRegistryBearerToken = "", "", ""
		src.SchemaRegistryTLSCAPEM, src.SchemaRegistryTLSCertPEM, src.SchemaRegistryTLSKeyPEM = "", "", ""
		src.SchemaRegistryTLSServerName = ""
	} else if p.URLs != nil {
		src.SchemaRegistryURLs = slices.Clone(*p.URLs)
	}
	for dst, val := range map[*string]*string{
		&src.SchemaRegistryUsername: p.BasicAuthUsername, &src.SchemaRegistryPassword: p.BasicAuthPassword,
		&src.SchemaRegistryBearerToken: p.BearerToken, &src.SchemaRegistryTLSCAPEM: p.TLSCAPEM,
		&src.SchemaRegistryTLSCertPEM: p.TLSCertPEM, &src.SchemaRegistryTLSKeyPEM: p.TLSKeyPEM,
		&src.SchemaRegistryTLSServerName: p.TLSServerName,
	} {
		if val != nil {
			*dst = *val
		}
	}
}

// RegistryOf returns the schemaregistry configuration of a source's
// registry, its secrets as they are in src. URLs are trimmed of spaces, as
// the registry's validation reads them.
func RegistryOf(src repo.Source) schemaregistry.Config {
	var urls []string
	for _, u := range src.SchemaRegistryURLs {
		urls = append(urls, strings.TrimSpace(u))
	}
	return schemaregistry.Config{
		URLs:          urls,
		Username:      src.SchemaRegistryUsername,
		Password:      src.SchemaRegistryPassword,
		BearerToken:   src.SchemaRegistryBearerToken,
		TLSCAPEM:      src.SchemaRegistryTLSCAPEM,
		TLSCertPEM:    src.SchemaRegistryTLSCertPEM,
		TLSKeyPEM:     src.SchemaRegistryTLSKeyPEM,
		TLSServerName: src.SchemaRegistryTLSServerName,
	}
}

// redactedRegistry returns a source's registry without its secrets, or nil.
func redactedRegistry(src repo.Source) *SchemaRegistryRecord {
	if len(src.SchemaRegistryURLs) == 0 {
		return nil
	}
	return &SchemaRegistryRecord{
		URLs:                 slices.Clone(src.SchemaRegistryURLs),
		BasicAuthUsername:    src.SchemaRegistryUsername,
		BasicAuthPasswordSet: src.SchemaRegistryPassword != "",
		BearerTokenSet:       src.SchemaRegistryBearerToken != "",
		TLSCAPEM:             src.SchemaRegistryTLSCAPEM,
		TLSCertPEM:           src.SchemaRegistryTLSCertPEM,
		TLSKeyPEMSet:         src.SchemaRegistryTLSKeyPEM != "",
		TLSServerName:        src.SchemaRegistryTLSServerName,
	}
}

// registryField is where the source's registry settings live in the API.
const registryField = "source.schema_registry"

// validateSchemaRegistry checks a source's registry with the registry
// client's own checks (everything but the network), naming the API field.
func validateSchemaRegistry(v *validation, in SourceInput) {
	if len(in.SchemaRegistryURLs) == 0 {
		rejectSet(v, "only allowed with "+registryField+".urls",
			registryField+".basic_auth_username", in.SchemaRegistryUsername,
			registryField+".basic_auth_password", in.SchemaRegistryPassword,
			registryField+".bearer_token", in.SchemaRegistryBearerToken,
			registryField+".tls_ca_pem", in.SchemaRegistryTLSCAPEM,
			registryField+".tls_cert_pem", in.SchemaRegistryTLSCertPEM,
			registryField+".tls_key_pem", in.SchemaRegistryTLSKeyPEM,
			registryField+".tls_server_name", in.SchemaRegistryTLSServerName)
		return
	}
	if err := RegistryOf(in).Validate(); err != nil {
		field, msg := registryErrorField(err.Error())
		v.addf(registryField+"."+field, "%s", msg)
	}
}

// registryErrorField splits a schemaregistry.Config error, which starts
// with the field (or fields) it is about, into the API field to report it
// under and the message. The registry's own names are the API's, but for
// its URLs: "url", "url 2" and "tls settings" (no https URL for them) are
// urls. The message keeps the error's whole text when the field it named
// is not exactly the one reported.
func registryErrorField(text string) (field, msg string) {
	head, rest, ok := strings.Cut(text, ": ")
	if !ok {
		return "urls", text
	}
	switch first, _, _ := strings.Cut(strings.ReplaceAll(head, ",", " "), " "); {
	case first == "url" || head == "tls settings":
		return "urls", text
	case head == first:
		return head, rest
	default:
		return first, text
	}
}
