package tlsreload

import (
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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReloadOnChangeAndSIGHUP: the served certificate follows its files,
// checked by polling and on SIGHUP; a broken pair keeps the previous one.
func TestReloadOnChangeAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	WritePair(t, certFile, keyFile, 1)
	r, err := New(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := Serial(t, r); got != 1 {
		t.Fatalf("serial %d", got)
	}

	// Polling: a long interval for the SIGHUP part below, a short one here.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Watch(ctx, 20*time.Millisecond, nil); close(done) }()
	WritePair(t, certFile, keyFile, 2)
	waitSerial(t, r, 2)
	// A half-written pair (a key that does not match) keeps serial 2.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several polls
	if got := Serial(t, r); got != 2 {
		t.Fatalf("a broken pair replaced the certificate: serial %d", got)
	}
	cancel()
	<-done

	hup := make(chan os.Signal, 1)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, time.Hour, hup)
	WritePair(t, certFile, keyFile, 3)
	hup <- os.Interrupt // any value: the caller relays SIGHUP
	waitSerial(t, r, 3)
}

func waitSerial(t *testing.T, r *Reloader, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for Serial(t, r) != want {
		if time.Now().After(deadline) {
			t.Fatalf("serial %d, want %d", Serial(t, r), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Serial is the serial number of the certificate r serves.
func Serial(t *testing.T, r *Reloader) int64 {
	t.Helper()
	c, _ := r.GetCertificate(&tls.ClientHelloInfo{})
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

// WritePair writes a self-signed certificate for 127.0.0.1 with serial
// number serial, and its key.
func WritePair(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kmirror"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
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
