package kafkaconn

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security protocols, spelled as Kafka's security.protocol.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL mechanisms, spelled as Kafka's sasl.mechanism.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismAWSMSKIAM   = "AWS_MSK_IAM"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// Mechanisms lists the SASL mechanisms kmirror speaks, in the order errors
// and documents name them.
var Mechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismAWSMSKIAM, MechanismOAuthBearer}

// mechanismList is Mechanisms for error messages.
const mechanismList = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, AWS_MSK_IAM or OAUTHBEARER"

// Security holds a cluster's security settings under their Kafka names. The
// PEM fields hold PEM text, not file paths. Errors name the fields as the REST
// API spells them (security_protocol, tls_ca_pem, ...).
type Security struct {
	Protocol      string // PLAINTEXT (also ""), SSL, SASL_PLAINTEXT, SASL_SSL
	SASLMechanism string // one of Mechanisms
	SASLUsername  string // PLAIN and SCRAM
	SASLPassword  string
	AWS           AWSAuth   // AWS_MSK_IAM
	OAuth         OAuthAuth // OAUTHBEARER
	TLSCAPEM      string    // trusted CAs; empty means the system roots
	TLSCertPEM    string    // client certificate, with TLSKeyPEM
	TLSKeyPEM     string
	TLSServerName string // empty means the host being dialed
}

// protocol returns the normalized protocol: upper case, "" as PLAINTEXT.
func (s Security) protocol() string {
	p := strings.ToUpper(strings.TrimSpace(s.Protocol))
	if p == "" {
		return ProtocolPlaintext
	}
	return p
}

// Authenticated reports whether the client proves who it is (SASL, or a
// TLS client certificate), so that the broker can tell it from anyone else.
func (s Security) Authenticated() bool {
	switch s.protocol() {
	case ProtocolSASLPlaintext, ProtocolSASLSSL:
		return true
	case ProtocolSSL:
		return s.TLSCertPEM != ""
	}
	return false
}

// opts validates s and turns it into SASL and TLS dialer options.
func (s Security) opts() ([]kgo.Opt, error) {
	var useSASL, useTLS bool
	switch p := s.protocol(); p {
	case ProtocolPlaintext:
	case ProtocolSSL:
		useTLS = true
	case ProtocolSASLPlaintext:
		useSASL = true
	case ProtocolSASLSSL:
		useSASL, useTLS = true, true
	default:
		return nil, fmt.Errorf("security_protocol: unknown %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s.Protocol)
	}

	// Settings the protocol would ignore are almost always a typo in the
	// protocol, so they are rejected rather than silently dropped.
	if f := firstSet(!useSASL, append([]string{"sasl_mechanism", s.SASLMechanism, "sasl_username", s.SASLUsername,
		"sasl_password", s.SASLPassword}, append(s.AWS.fields(), s.OAuth.fields()...)...)...); f != "" {
		return nil, fmt.Errorf("%s: set, but security_protocol %s does not use SASL", f, s.protocol())
	}
	if f := firstSet(!useTLS, "tls_ca_pem", s.TLSCAPEM, "tls_cert_pem", s.TLSCertPEM, "tls_key_pem", s.TLSKeyPEM, "tls_server_name", s.TLSServerName); f != "" {
		return nil, fmt.Errorf("%s: set, but security_protocol %s does not use TLS", f, s.protocol())
	}

	var opts []kgo.Opt
	if useSASL {
		m, err := s.saslMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	if useTLS {
		tc, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts, nil
}

// firstSet returns the name of the first non-empty value in name, value
// pairs, if check.
func firstSet(check bool, pairs ...string) string {
	for i := 0; check && i < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			return pairs[i]
		}
	}
	return ""
}

func (s Security) saslMechanism() (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(s.SASLMechanism))
	switch mech {
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		// Settings of another mechanism are a mix-up, refused like a
		// setting the protocol would ignore.
		if f := firstSet(true, append(s.AWS.fields(), s.OAuth.fields()...)...); f != "" {
			return nil, fmt.Errorf("%s: set, but sasl_mechanism %s does not use it", f, mech)
		}
		if s.SASLUsername == "" {
			return nil, fmt.Errorf("sasl_username: required with security_protocol %s", s.protocol())
		}
	case MechanismAWSMSKIAM, MechanismOAuthBearer:
		other := s.OAuth.fields()
		if mech == MechanismOAuthBearer {
			other = s.AWS.fields()
		}
		if f := firstSet(true, append([]string{"sasl_username", s.SASLUsername, "sasl_password", s.SASLPassword}, other...)...); f != "" {
			return nil, fmt.Errorf("%s: set, but sasl_mechanism %s does not use it", f, mech)
		}
	}
	switch mech {
	case MechanismPlain:
		return plain.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsMechanism(), nil
	case MechanismScramSHA256:
		return scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha256Mechanism(), nil
	case MechanismScramSHA512:
		return scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha512Mechanism(), nil
	case MechanismAWSMSKIAM:
		return s.AWS.mechanism()
	case MechanismOAuthBearer:
		return s.OAuth.mechanism()
	case "":
		// Kafka would default to GSSAPI, which kmirror does not speak.
		return nil, fmt.Errorf("sasl_mechanism: required with security_protocol %s (%s)", s.protocol(), mechanismList)
	default:
		return nil, fmt.Errorf("sasl_mechanism: unsupported %q (want %s)", s.SASLMechanism, mechanismList)
	}
}

// String redacts the secrets, so a Security printed by mistake leaks
// nothing.
func (s Security) String() string {
	return fmt.Sprintf("{protocol=%s mechanism=%s username=%s password=%s aws=%s oauth=%s ca=%s cert=%s key=%s server_name=%s}",
		s.protocol(), s.SASLMechanism, s.SASLUsername, Redact(s.SASLPassword), s.AWS, s.OAuth,
		Present(s.TLSCAPEM), Present(s.TLSCertPEM), Redact(s.TLSKeyPEM), s.TLSServerName)
}

// LogValue redacts like String.
func (s Security) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("security_protocol", s.protocol()),
		slog.String("sasl_mechanism", s.SASLMechanism),
		slog.String("sasl_username", s.SASLUsername),
		slog.String("sasl_password", Redact(s.SASLPassword)),
	}
	for i, f := 0, s.AWS.redactedFields(); i < len(f); i += 2 {
		attrs = append(attrs, slog.String(f[i], f[i+1]))
	}
	for i, f := 0, s.OAuth.redactedFields(); i < len(f); i += 2 {
		attrs = append(attrs, slog.String(f[i], f[i+1]))
	}
	return slog.GroupValue(append(attrs,
		slog.String("tls_ca_pem", Present(s.TLSCAPEM)),
		slog.String("tls_cert_pem", Present(s.TLSCertPEM)),
		slog.String("tls_key_pem", Redact(s.TLSKeyPEM)),
		slog.String("tls_server_name", s.TLSServerName),
	)...)
}

// Redact is how a secret shows in a config's String and log value:
// "[redacted]" when set, "" when not.
func Redact(secret string) string {
	if secret == "" {
		return ""
	}
	return "[redacted]"
}

// Present is how PEM text shows there: "[set]" when given, "" when not.
func Present(pem string) string {
	if pem == "" {
		return ""
	}
	return "[set]"
}
