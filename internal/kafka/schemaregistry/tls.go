package schemaregistry

import (
	"crypto/tls"
	"errors"
	"fmt"

	"kmirror/internal/kafka/kafkaconn"
)

// tlsConfig builds the client's TLS settings from the PEM fields. Each error
// names the field whose text is wrong, since an operator pastes them one by
// one.
func (c Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.TLSServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, // only when the operator names it
	}
	if c.TLSCAPEM != "" {
		pool, err := kafkaconn.CertPool(c.TLSCAPEM)
		if errors.Is(err, kafkaconn.ErrNoCertificate) {
			return nil, errors.New("tls_ca_pem: no BEGIN CERTIFICATE block found")
		}
		if err != nil {
			return nil, fmt.Errorf("tls_ca_pem: %w", err)
		}
		tc.RootCAs = pool
	}
	switch {
	case c.TLSCertPEM != "" && c.TLSKeyPEM == "":
		return nil, errors.New("tls_key_pem: required with tls_cert_pem")
	case c.TLSCertPEM == "" && c.TLSKeyPEM != "":
		return nil, errors.New("tls_cert_pem: required with tls_key_pem")
	case c.TLSCertPEM != "":
		if !kafkaconn.HasPEMBlock(c.TLSCertPEM, kafkaconn.IsCertificateBlock) {
			return nil, errors.New("tls_cert_pem: no BEGIN CERTIFICATE block found")
		}
		if !kafkaconn.HasPEMBlock(c.TLSKeyPEM, kafkaconn.IsPrivateKeyBlock) {
			return nil, errors.New("tls_key_pem: no BEGIN PRIVATE KEY block found")
		}
		pair, err := tls.X509KeyPair([]byte(c.TLSCertPEM), []byte(c.TLSKeyPEM))
		if err != nil {
			// The standard library's message never quotes the key.
			return nil, fmt.Errorf("tls_cert_pem, tls_key_pem: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
