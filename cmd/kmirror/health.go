package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// healthCommand is `kmirror health`: it asks this machine's server for
// /healthz and exits 0 when it answers 200, for a container's HEALTHCHECK
// (the image has no curl). The address comes from KMIRROR_LISTEN, as the
// server's does; an address on every interface is asked on loopback.
func healthCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kmirror health", flag.ContinueOnError)
	listen := fs.String("listen", envOr("KMIRROR_LISTEN", "127.0.0.1:8080"), "the server's listen address (KMIRROR_LISTEN)")
	path := fs.String("path", "/healthz", "the path to ask: /healthz (the process serves) or /readyz (and the database answers)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	client := &http.Client{Timeout: *timeout}
	if os.Getenv("KMIRROR_TLS_CERT_FILE") != "" {
		// Only liveness is asked of our own process: the certificate's
		// name need not be the loopback address.
		scheme = "https"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec
	}
	url := scheme + "://" + net.JoinHostPort(host, port) + *path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, resp.Status)
	return nil
}
