package api

import (
	"cmp"
	"log"
	"net/http"
	"time"
)

// HTTPServerConfig bounds what one client can hold of the server: every
// phase of a request has a deadline, so a client that trickles a body or
// keeps idle connections open is cut off. Zero values take the defaults.
type HTTPServerConfig struct {
	// ReadHeaderTimeout: the request line and headers; default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout: the whole request, body included; default 30s. Once the
	// body is read, a /v1 request's read and write deadlines become its own
	// (RequestTimeout, plus a topic action's ?wait; none for the event
	// stream), so a long ?wait or stream is not cut.
	ReadTimeout time.Duration
	// WriteTimeout: from the end of the headers to the end of the response,
	// for requests outside /v1 (docs, metrics, console); default 45s.
	WriteTimeout time.Duration
	// IdleTimeout: a keep-alive connection between requests; default 30s.
	IdleTimeout time.Duration
	// MaxHeaderBytes: request line and headers; default 32 KiB (net/http's
	// default is 1 MiB).
	MaxHeaderBytes int
	ErrorLog       *log.Logger
}

// NewHTTPServer returns an http.Server for h with the limits of cfg.
func NewHTTPServer(h http.Handler, cfg HTTPServerConfig) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, 10*time.Second),
		ReadTimeout:       cmp.Or(cfg.ReadTimeout, 30*time.Second),
		WriteTimeout:      cmp.Or(cfg.WriteTimeout, 45*time.Second),
		IdleTimeout:       cmp.Or(cfg.IdleTimeout, 30*time.Second),
		MaxHeaderBytes:    cmp.Or(cfg.MaxHeaderBytes, 32<<10),
		ErrorLog:          cfg.ErrorLog,
	}
}
