package schemaregistry

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
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
		pool, err := parseCAs(c.TLSCAPEM)
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
		if !pemHas(c.TLSCertPEM, func(t string) bool { return t == "CERTIFICATE" }) {
			return nil, errors.New("tls_cert_pem: no BEGIN CERTIFICATE block found")
		}
		if !pemHas(c.TLSKeyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
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

// parseCAs reads every CERTIFICATE block and fails on a broken one, where
// x509.CertPool.AppendCertsFromPEM would skip it without a word.
func parseCAs(text string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest := []byte(text)
	count := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		count++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", count, err)
		}
		pool.AddCert(cert)
	}
	if count == 0 {
		return nil, errors.New("no BEGIN CERTIFICATE block found")
	}
	return pool, nil
}

func pemHas(text string, match func(blockType string) bool) bool {
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return false
		}
		if match(block.Type) {
			return true
		}
	}
}
