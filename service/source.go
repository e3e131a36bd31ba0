package service

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"

	"kmirror/internal/runtime/kafkaconn"
	"kmirror/repo"
)

// SourceInput is a source cluster's connection as an operator gives it, with
// Kafka's names: the row's own shape, validated before it is stored.
// Secrets are write-only.
type SourceInput = repo.Source

// The security protocols and SASL mechanisms a source may use, with Kafka's
// names.
var (
	SecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
	SASLMechanisms    = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
)

// validateSource checks a source connection's fields and their combination.
func validateSource(v *validation, in SourceInput) {
	if _, err := ParseBootstrapServers(in.BootstrapServers); err != nil {
		v.addf("source.bootstrap_servers", "%s", err)
	}
	proto := in.SecurityProtocol
	if !slices.Contains(SecurityProtocols, proto) {
		v.addf("source.security_protocol", "%q is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", proto)
		return
	}
	sasl := proto == "SASL_PLAINTEXT" || proto == "SASL_SSL"
	useTLS := proto == "SSL" || proto == "SASL_SSL"
	if sasl {
		if !slices.Contains(SASLMechanisms, in.SASLMechanism) {
			v.addf("source.sasl_mechanism", "%q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", in.SASLMechanism)
		}
		if in.SASLUsername == "" {
			v.addf("source.sasl_username", "required with %s", proto)
		}
		if in.SASLPassword == "" {
			v.addf("source.sasl_password", "required with %s", proto)
		}
	} else {
		rejectSet(v, "only allowed with SASL_PLAINTEXT or SASL_SSL",
			"source.sasl_mechanism", in.SASLMechanism,
			"source.sasl_username", in.SASLUsername,
			"source.sasl_password", in.SASLPassword)
	}
	if !useTLS {
		rejectSet(v, "only allowed with SSL or SASL_SSL",
			"source.tls_ca_pem", in.TLSCAPEM,
			"source.tls_cert_pem", in.TLSCertPEM,
			"source.tls_key_pem", in.TLSKeyPEM,
			"source.tls_server_name", in.TLSServerName)
		return
	}
	if in.TLSCAPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(in.TLSCAPEM)) {
		v.addf("source.tls_ca_pem", "no PEM certificate found")
	}
	switch {
	case (in.TLSCertPEM == "") != (in.TLSKeyPEM == ""):
		v.addf("source.tls_cert_pem", "tls_cert_pem and tls_key_pem must be given together")
	case in.TLSCertPEM != "":
		if block, _ := pem.Decode([]byte(in.TLSCertPEM)); block == nil {
			v.addf("source.tls_cert_pem", "no PEM block found")
		} else if _, err := tls.X509KeyPair([]byte(in.TLSCertPEM), []byte(in.TLSKeyPEM)); err != nil {
			// The key's content is never echoed back.
			v.addf("source.tls_key_pem", "certificate and key do not form a pair")
		}
	}
}

// ConnOf returns the client configuration for a mirror's source cluster.
func ConnOf(m repo.Mirror) kafkaconn.Config {
	servers, _ := ParseBootstrapServers(m.BootstrapServers)
	return kafkaconn.Config{
		BootstrapServers: servers,
		Security: kafkaconn.Security{
			Protocol:      m.SecurityProtocol,
			SASLMechanism: m.SASLMechanism,
			SASLUsername:  m.SASLUsername,
			SASLPassword:  m.SASLPassword,
			TLSCAPEM:      m.TLSCAPEM,
			TLSCertPEM:    m.TLSCertPEM,
			TLSKeyPEM:     m.TLSKeyPEM,
			TLSServerName: m.TLSServerName,
		},
	}
}

// rejectSet reports each (field, value) pair whose value is set.
func rejectSet(v *validation, why string, fieldValues ...string) {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if fieldValues[i+1] != "" {
			v.addf(fieldValues[i], "%s", why)
		}
	}
}
