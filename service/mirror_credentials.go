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
	CredentialSASLPassword = "sasl_password"
	CredentialTLSKey       = "tls_key_pem"
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
	return out
}

// stillMissing is what of a mirror's missing secrets a patch left missing:
// one stays missing while it is empty and still used (a SASL password under
// a SASL protocol, a TLS key beside a client certificate).
func stillMissing(m repo.Mirror) []string {
	return slices.DeleteFunc(slices.Clone(m.MissingCredentials), func(c string) bool {
		switch c {
		case CredentialSASLPassword:
			return m.SASLPassword != "" || m.SASLMechanism == ""
		case CredentialTLSKey:
			return m.TLSKeyPEM != "" || m.TLSCertPEM == ""
		}
		return true
	})
}
