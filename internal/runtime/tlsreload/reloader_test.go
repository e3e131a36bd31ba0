package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"kmirror/internal/testing/testcert"
)

// TestReloadOnChangeAndSIGHUP: the served certificate follows its files,
// checked by polling and on SIGHUP; a broken pair keeps the previous one.
func TestReloadOnChangeAndSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	testcert.WritePair(t, certFile, keyFile, 1)
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
	testcert.WritePair(t, certFile, keyFile, 2)
	waitSerial(t, r, 2)
	// A half-written pair (a key that does not match) keeps serial 2.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); err == nil || changed {
		t.Fatalf("reloading a broken pair: changed %v, err %v; want an error", changed, err)
	}
	if got := Serial(t, r); got != 2 {
		t.Fatalf("a broken pair replaced the certificate: serial %d", got)
	}
	cancel()
	<-done

	hup := make(chan os.Signal, 1)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, time.Hour, hup)
	testcert.WritePair(t, certFile, keyFile, 3)
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
