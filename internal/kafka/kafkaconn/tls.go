package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// tlsConfig builds the client TLS config from the PEM fields, naming the
// field in every error so an operator knows which paste was wrong.
func (s Security) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: s.TLSServerName,
	}
	if s.TLSCAPEM != "" {
		pool, err := CertPool(s.TLSCAPEM)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_pem: %w", err)
		}
		tc.RootCAs = pool
	}
	switch {
	case s.TLSCertPEM != "" && s.TLSKeyPEM == "":
		return nil, errors.New("tls_key_pem: required with tls_cert_pem")
	case s.TLSCertPEM == "" && s.TLSKeyPEM != "":
		return nil, errors.New("tls_cert_pem: required with tls_key_pem")
	case s.TLSCertPEM != "":
		cert, err := keyPair(s.TLSCertPEM, s.TLSKeyPEM)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// ErrNoCertificate: PEM text held no CERTIFICATE block.
var ErrNoCertificate = errors.New("no certificate found (want PEM text with a BEGIN CERTIFICATE block)")

// CertPool parses every CERTIFICATE block; unlike AppendCertsFromPEM it
// reports a broken certificate instead of skipping it, and ErrNoCertificate
// when there is none.
func CertPool(text string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest, n := []byte(text), 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, ErrNoCertificate
	}
	return pool, nil
}

func keyPair(certPEM, keyPEM string) (tls.Certificate, error) {
	if !HasPEMBlock(certPEM, IsCertificateBlock) {
		return tls.Certificate{}, errors.New("tls_cert_pem: no certificate found (want PEM text with a BEGIN CERTIFICATE block)")
	}
	if !HasPEMBlock(keyPEM, IsPrivateKeyBlock) {
		return tls.Certificate{}, errors.New("tls_key_pem: no private key found (want PEM text with a BEGIN PRIVATE KEY block)")
	}
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls_cert_pem, tls_key_pem: %w", err)
	}
	return cert, nil
}

// IsCertificateBlock and IsPrivateKeyBlock match PEM block types for
// HasPEMBlock.
func IsCertificateBlock(blockType string) bool { return blockType == "CERTIFICATE" }

func IsPrivateKeyBlock(blockType string) bool { return strings.HasSuffix(blockType, "PRIVATE KEY") }

// HasPEMBlock says whether text holds a PEM block whose type match accepts:
// a certificate pasted as a key is named as such before the standard
// library's less telling error.
func HasPEMBlock(text string, match func(blockType string) bool) bool {
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
