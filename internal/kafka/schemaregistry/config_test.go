package schemaregistry

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"kmirror/internal/testing/testcert"
	"log"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func TestNewClientRefusesBadConfig(t *testing.T) {
	cert, key := testcert.SelfSigned(t)
	otherCert, _ := testcert.SelfSigned(t)
	const secret = "hunter2-secret"
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "url: required"},
		{"no scheme", Config{URLs: []string{"registry:8081"}}, "want an http:// or https:// URL"},
		{"no host", Config{URLs: []string{"http://"}}, "no host"},
		{"credentials in the url", Config{URLs: []string{"https://u:" + secret + "@registry"}}, "holds credentials"},
		{"basic and bearer", Config{URLs: []string{"https://r"}, Username: "u", Password: secret, BearerToken: secret}, "both set"},
		{"password alone", Config{URLs: []string{"https://r"}, Password: secret}, "basic_auth_username: required"},
		{"username alone", Config{URLs: []string{"https://r"}, Username: "u"}, "basic_auth_password: required"},
		{"bearer with its scheme", Config{URLs: []string{"https://r"}, BearerToken: "Bearer " + secret}, "bearer_token"},
		{"tls over http", Config{URLs: []string{"http://r"}, TLSCAPEM: cert}, "no url is https://"},
		{"ca not pem", Config{URLs: []string{"https://r"}, TLSCAPEM: "not a certificate"}, "tls_ca_pem: no BEGIN CERTIFICATE"},
		{"ca broken", Config{URLs: []string{"https://r"}, TLSCAPEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, "tls_ca_pem: certificate 1"},
		{"cert without key", Config{URLs: []string{"https://r"}, TLSCertPEM: cert}, "tls_key_pem: required"},
		{"key without cert", Config{URLs: []string{"https://r"}, TLSKeyPEM: key}, "tls_cert_pem: required"},
		{"key not pem", Config{URLs: []string{"https://r"}, TLSCertPEM: cert, TLSKeyPEM: secret}, "tls_key_pem: no BEGIN PRIVATE KEY"},
		{"key of another cert", Config{URLs: []string{"https://r"}, TLSCertPEM: otherCert, TLSKeyPEM: key}, "tls_cert_pem, tls_key_pem"},
		{"negative timeout", Config{URLs: []string{"https://r"}, RequestTimeout: -time.Second}, "request_timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewClient(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestConfigRedactsSecrets(t *testing.T) {
	_, key := testcert.SelfSigned(t)
	cfg := Config{URLs: []string{"https://r"}, Username: "svc", Password: "p4ss", BearerToken: "t0ken", TLSKeyPEM: key}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("registry", "config", cfg)
	for _, text := range []string{cfg.String(), fmt.Sprint(cfg), logged.String()} {
		for _, secret := range []string{"p4ss", "t0ken", "PRIVATE KEY"} {
			if strings.Contains(text, secret) {
				t.Errorf("%q shows a secret (%s)", text, secret)
			}
		}
		if !strings.Contains(text, "svc") {
			t.Errorf("%q hides the user name, which is not a secret", text)
		}
	}
}

func TestNewClientAuthenticates(t *testing.T) {
	ctx := context.Background()
	basic := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("svc:p4ss"))))
	t.Cleanup(basic.Close)
	bearer := srfake.New(srfake.WithAuth("Bearer t0ken"))
	t.Cleanup(bearer.Close)
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"basic", Config{URLs: []string{basic.URL()}, Username: "svc", Password: "p4ss"}, true},
		{"basic, wrong password", Config{URLs: []string{basic.URL()}, Username: "svc", Password: "nope"}, false},
		{"bearer", Config{URLs: []string{bearer.URL()}, BearerToken: "t0ken"}, true},
		{"bearer, none", Config{URLs: []string{bearer.URL()}}, false},
	} {
		cl, err := NewClient(c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := cl.Subjects(ctx); (err == nil) != c.ok {
			t.Errorf("%s: listing subjects: %v, want success %t", c.name, err, c.ok)
		}
	}
}

// A registry over TLS that asks for a client certificate: the CA PEM makes
// its certificate trusted, the client pair answers its request.
func TestNewClientSpeaksTLS(t *testing.T) {
	reg := srfake.NewRegistry()
	srv := httptest.NewUnstartedServer(reg.Handler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	cert, key := testcert.SelfSigned(t)
	ctx := context.Background()

	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" for success
	}{
		{"trusted, with a client certificate", Config{URLs: []string{srv.URL}, TLSCAPEM: caPEM, TLSCertPEM: cert, TLSKeyPEM: key}, ""},
		{"untrusted server", Config{URLs: []string{srv.URL}, TLSCertPEM: cert, TLSKeyPEM: key}, "certificate"},
		{"no client certificate", Config{URLs: []string{srv.URL}, TLSCAPEM: caPEM}, "certificate"},
		{"skip verify, named", Config{URLs: []string{srv.URL}, InsecureSkipVerify: true, TLSCertPEM: cert, TLSKeyPEM: key}, ""},
	} {
		cl, err := NewClient(c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = cl.Subjects(ctx)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one about the %s", c.name, err, c.want)
		}
	}
}
