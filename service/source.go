package service

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"

	"kmirror/internal/kafka/kafkaconn"
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
	SASLMechanisms    = kafkaconn.Mechanisms
)

// validateSource checks a source connection's fields and their combination.
func validateSource(v *validation, in SourceInput) {
	if _, err := ParseBootstrapServers(in.BootstrapServers); err != nil {
		v.addf("source.bootstrap_servers", "%s", err)
	}
	validateSchemaRegistry(v, in)
	proto := in.SecurityProtocol
	if !slices.Contains(SecurityProtocols, proto) {
		v.addf("source.security_protocol", "%q is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", proto)
		return
	}
	sasl := proto == "SASL_PLAINTEXT" || proto == "SASL_SSL"
	useTLS := proto == "SSL" || proto == "SASL_SSL"
	if sasl {
		validateSASL(v, in)
	} else {
		rejectSet(v, "only allowed with SASL_PLAINTEXT or SASL_SSL", append([]string{
			"source.sasl_mechanism", in.SASLMechanism,
			"source.sasl_username", in.SASLUsername,
			"source.sasl_password", in.SASLPassword}, append(awsFields(in), oauthFields(in)...)...)...)
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

// validateSASL checks the settings of a source's SASL mechanism, and that
// no other mechanism's are set.
func validateSASL(v *validation, in SourceInput) {
	mech := in.SASLMechanism
	others := func(fieldValues ...string) {
		rejectSet(v, "not used by sasl_mechanism "+mech, fieldValues...)
	}
	if !slices.Contains(SASLMechanisms, mech) {
		v.addf("source.sasl_mechanism", "%q is not one of %s", mech, strings.Join(SASLMechanisms, ", "))
		// What PLAIN and SCRAM, the usual choices, need is said too.
		others = func(...string) {}
	}
	switch mech {
	case kafkaconn.MechanismAWSMSKIAM:
		others(append([]string{"source.sasl_username", in.SASLUsername, "source.sasl_password", in.SASLPassword}, oauthFields(in)...)...)
		if err := kafkaconn.CheckAWS(awsOf(in)); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			v.addf("source."+field, "%s", msg)
		}
	case kafkaconn.MechanismOAuthBearer:
		others(append([]string{"source.sasl_username", in.SASLUsername, "source.sasl_password", in.SASLPassword}, awsFields(in)...)...)
		if err := kafkaconn.CheckTokenEndpoint(in.OAuthTokenEndpointURL); err != nil {
			v.addf("source.sasl_oauthbearer_token_endpoint_url", "%s", err)
		}
		if in.OAuthClientID == "" {
			v.addf("source.sasl_oauthbearer_client_id", "required with sasl_mechanism OAUTHBEARER")
		}
		if in.OAuthClientSecret == "" {
			v.addf("source.sasl_oauthbearer_client_secret", "required with sasl_mechanism OAUTHBEARER")
		}
		if err := kafkaconn.CheckExtensions(in.OAuthExtensions); err != nil {
			v.addf("source.sasl_oauthbearer_extensions", "%s", err)
		}
	default:
		others(append(awsFields(in), oauthFields(in)...)...)
		if in.SASLUsername == "" {
			v.addf("source.sasl_username", "required with %s", in.SecurityProtocol)
		}
		if in.SASLPassword == "" {
			v.addf("source.sasl_password", "required with %s", in.SecurityProtocol)
		}
	}
}

// awsFields and oauthFields are (field, value) pairs of each mechanism's
// settings, for rejectSet.
func awsFields(in SourceInput) []string {
	return []string{"source.aws_access_key_id", in.AWSAccessKeyID, "source.aws_secret_access_key", in.AWSSecretAccessKey,
		"source.aws_session_token", in.AWSSessionToken, "source.aws_region", in.AWSRegion}
}

func oauthFields(in SourceInput) []string {
	ext := ""
	if len(in.OAuthExtensions) > 0 {
		ext = "set"
	}
	return []string{"source.sasl_oauthbearer_token_endpoint_url", in.OAuthTokenEndpointURL,
		"source.sasl_oauthbearer_client_id", in.OAuthClientID, "source.sasl_oauthbearer_client_secret", in.OAuthClientSecret,
		"source.sasl_oauthbearer_scope", in.OAuthScope, "source.sasl_oauthbearer_extensions", ext}
}

func awsOf(in SourceInput) kafkaconn.AWSAuth {
	return kafkaconn.AWSAuth{AccessKeyID: in.AWSAccessKeyID, SecretAccessKey: in.AWSSecretAccessKey,
		SessionToken: in.AWSSessionToken, Region: in.AWSRegion}
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
			AWS:           awsOf(m.Source),
			OAuth: kafkaconn.OAuthAuth{TokenEndpointURL: m.OAuthTokenEndpointURL, ClientID: m.OAuthClientID,
				ClientSecret: m.OAuthClientSecret, Scope: m.OAuthScope, Extensions: m.OAuthExtensions},
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
