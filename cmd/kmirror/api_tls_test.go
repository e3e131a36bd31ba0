package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"kmirror/internal/testdb"
)

// TestAPIOverTLSReloadsOnSIGHUP: with --tls-cert-file and --tls-key-file
// the API speaks HTTPS, and a new certificate written over the files is
// served after a SIGHUP, with no restart.
func TestAPIOverTLSReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCertPair(t, certFile, keyFile, 1)

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	serverErr := make(chan error, 1)
	go func() {
		serverErr <- runServer(ctx, serverConfig{Listen: "127.0.0.1:0", DatabaseURL: testdb.New(t), InstanceID: "tls",
			LeaseTTL: 15 * time.Second, LeaseRenewInterval: 5 * time.Second,
			TLSCertFile: certFile, TLSKeyFile: keyFile, TLSReloadInterval: time.Hour, // SIGHUP only
			Logger: slog.New(slog.DiscardHandler), Ready: func(addr string) { ready <- addr }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-serverErr; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	var addr string
	select {
	case addr = <-ready:
	case err := <-serverErr:
		t.Fatalf("server: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("server not ready")
	}

	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("GET /healthz over TLS: %d", resp.StatusCode)
	}
	if s := servedSerial(t, addr); s != 1 {
		t.Fatalf("serial %d", s)
	}

	// The CLI trusts a private CA through KMIRROR_CA_FILE, and only then.
	t.Setenv("KMIRROR_CA_FILE", certFile) // self-signed: its own CA
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"mirrors", "--server", "https://" + addr, "--list"}, &out, &errOut); code != 0 {
		t.Fatalf("kmirror mirrors --list over https with KMIRROR_CA_FILE: exit %d: %s", code, errOut.String())
	}
	t.Setenv("KMIRROR_CA_FILE", "")
	if code := run(context.Background(), []string{"mirrors", "--server", "https://" + addr, "--list"}, &out, &errOut); code == 0 {
		t.Fatal("kmirror mirrors --list trusted a self-signed certificate without KMIRROR_CA_FILE")
	}

	writeCertPair(t, certFile, keyFile, 2)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for servedSerial(t, addr) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate is not served after SIGHUP")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// writeCertPair writes a self-signed certificate for localhost and
// 127.0.0.1 with the given serial number, and its key.
func writeCertPair(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kmirror"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
