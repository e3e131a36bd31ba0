// Package testcert makes throw-away certificates for tests of TLS.
// Test code only.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// SelfSigned returns a fresh certificate that is its own CA, for localhost
// and 127.0.0.1, valid an hour either side of now and usable by a server or
// a client, and its key, as PEM text.
func SelfSigned(tb testing.TB) (certPEM, keyPEM string) {
	tb.Helper()
	cert, key := selfSigned(tb, 1)
	return string(cert), string(key)
}

// WritePair writes a self-signed certificate as SelfSigned makes, with the
// given serial number, and its key. It signs itself, so a client that
// trusts certFile verifies it.
func WritePair(tb testing.TB, certFile, keyFile string, serial int64) {
	tb.Helper()
	cert, key := selfSigned(tb, serial)
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		tb.Fatal(err)
	}
}

func selfSigned(tb testing.TB, serial int64) (certPEM, keyPEM []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kmirror"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
