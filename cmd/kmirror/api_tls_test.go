package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"kmirror/internal/testing/testcert"
	"kmirror/internal/testing/testdb"
)

// TestAPIOverTLSReloadsOnSIGHUP: with --tls-cert-file and --tls-key-file
// the API speaks HTTPS, and a new certificate written over the files is
// served after a SIGHUP, with no restart.
func TestAPIOverTLSReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	testcert.WritePair(t, certFile, keyFile, 1)

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

	testcert.WritePair(t, certFile, keyFile, 2)
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
