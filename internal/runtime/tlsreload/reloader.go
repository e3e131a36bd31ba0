// Package tlsreload serves a TLS certificate that can be replaced without a
// restart: it is read again on demand (SIGHUP) and whenever its files
// change, so rotating the API's certificate needs no restart.
package tlsreload

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// Reloader holds the current certificate of a cert and key file pair.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate]
	// sum is the digest of the files the current certificate came from.
	sum []byte
}

// New loads the pair once; an unreadable or mismatched pair is an error.
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: cmp.Or(log, slog.Default())}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate: every handshake gets the
// current certificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// Reload reads the files again and swaps the certificate when they changed.
// On an error the current certificate stays. It reports whether it swapped.
func (r *Reloader) Reload() (bool, error) {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return false, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return false, fmt.Errorf("TLS key: %w", err)
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write(keyPEM)
	sum := h.Sum(nil)
	if bytes.Equal(sum, r.sum) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&cert)
	r.sum = sum
	return true, nil
}

// Watch reloads on every value of hup (SIGHUP) and when the files change,
// checked every interval (default 5s), until ctx ends. A pair that fails to
// load (say, the certificate written before its key) is logged and the
// current certificate kept; the next check tries again.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	tick := time.NewTicker(cmp.Or(interval, 5*time.Second))
	defer tick.Stop()
	lastErr := "" // a broken pair is logged once, not at every check
	for {
		why := "files changed"
		select {
		case <-ctx.Done():
			return
		case <-hup:
			why = "SIGHUP"
		case <-tick.C:
		}
		swapped, err := r.Reload()
		switch {
		case err != nil && why == "SIGHUP":
			r.log.Error("TLS certificate reload failed; still serving the previous one", "err", err)
		case err != nil && err.Error() != lastErr:
			r.log.Warn("TLS certificate files cannot be loaded yet; still serving the previous one", "err", err)
		case swapped:
			r.log.Info("TLS certificate reloaded", "why", why, "cert_file", r.certFile)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
	}
}
