package devregistry

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// readHeaderTimeout bounds a request's headers, so a client that opens a
// connection and says nothing does not hold a goroutine for ever.
const readHeaderTimeout = 10 * time.Second

// Registry is a running in-memory Schema Registry. Its methods are safe for
// concurrent use.
type Registry struct {
	front *srfake.Registry // the default context; every request enters here
	opts  []srfake.Option
	addr  string // host:port, kept across Stop and Start

	mu       sync.Mutex
	srv      *http.Server // nil while stopped
	ln       net.Listener // srv's, closed by Stop itself: Serve may not have taken it yet
	closed   bool
	contexts map[string]*srfake.Registry
	imports  []string // "<subject> v<version> id<id>", in the order written

	down          atomic.Bool
	crashAt       atomic.Int64 // the registration (1-based) at which it goes down; 0 never
	failAt        atomic.Int64 // the registration (1-based) that answers 500; 0 never
	registrations atomic.Int64
	onRegister    atomic.Pointer[func(n int)]
}

// New starts a registry on a free port of 127.0.0.1. The options are
// srfake's (WithAuth, WithGlobalCompat), applied to every context.
func New(opts ...srfake.Option) (*Registry, error) {
	return Listen("127.0.0.1:0", opts...)
}

// Listen starts a registry on addr (host:port; port 0 picks a free one).
func Listen(addr string, opts ...srfake.Option) (*Registry, error) {
	r := &Registry{front: srfake.NewRegistry(opts...), opts: opts, contexts: map[string]*srfake.Registry{}}
	r.front.Intercept(r.faults)
	r.front.Intercept(r.route)
	r.front.Intercept(r.importer(r.front))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("schema registry: listen on %s: %w", addr, err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	return r, nil
}

// URL is the registry's base URL, the same after a Restart.
func (r *Registry) URL() string { return "http://" + r.addr }

// Context returns the srfake that holds a registry context's subjects ("" or
// "." for the default context, ".east" for another), for seeding and for
// checks that must not go through HTTP (while the registry is down). In a
// named context's srfake the subjects are named as over HTTP, qualified:
// :.east:orders-value.
func (r *Registry) Context(name string) *srfake.Registry {
	if name == "" || name == "." {
		return r.front
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.contexts[name]
	if !ok {
		reg = srfake.NewRegistry(r.opts...)
		reg.Intercept(r.importer(reg))
		r.contexts[name] = reg
	}
	return reg
}

// Imports returns the versions written in IMPORT mode so far, in order, each
// as "<subject> v<version> id<id>".
func (r *Registry) Imports() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.imports)
}

// SetDown takes the registry down (true) or brings it back (false). While
// down it accepts connections and drops each unanswered, as a registry whose
// process hangs behind a load balancer; its state is kept.
func (r *Registry) SetDown(down bool) { r.down.Store(down) }

// CrashAtRegistration makes the registry go down (SetDown(true)) as the nth
// registration (POST /subjects/<s>/versions, 1-based, counted since New)
// arrives, before it is handled; 0 turns it off.
func (r *Registry) CrashAtRegistration(n int) { r.crashAt.Store(int64(n)) }

// FailRegistration makes the nth registration (1-based, counted since New)
// answer 500 without being handled; 0 turns it off.
func (r *Registry) FailRegistration(n int) { r.failAt.Store(int64(n)) }

// OnRegistration runs fn, with the registration's 1-based count, as each
// registration arrives, before it is handled; nil removes it.
func (r *Registry) OnRegistration(fn func(n int)) {
	if fn == nil {
		r.onRegister.Store(nil)
		return
	}
	r.onRegister.Store(&fn)
}

// Stop stops serving, as a registry whose process has stopped: the port is
// closed and open connections are cut. The state is kept for Start.
func (r *Registry) Stop() {
	r.mu.Lock()
	srv, ln := r.srv, r.ln
	r.srv, r.ln = nil, nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		_ = ln.Close() // the port is free when Stop returns
	}
}

// Start serves again at the same URL, with the state the registry had. It
// does nothing when the registry is serving, and fails after Close, or when
// another process took the port meanwhile.
func (r *Registry) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return errors.New("schema registry: closed")
	case r.srv != nil:
		return nil
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("schema registry: listen again on %s: %w", r.addr, err)
	}
	r.serveLocked(ln)
	return nil
}

// Restart is Stop then Start: the registry comes back at the same URL with
// its subjects, ids and modes, as a real one reads them back from its
// _schemas topic.
func (r *Registry) Restart() error {
	r.Stop()
	return r.Start()
}

// Close stops the registry for good.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.Stop()
}

func (r *Registry) serve(ln net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serveLocked(ln)
}

func (r *Registry) serveLocked(ln net.Listener) {
	srv := &http.Server{Handler: r.front.Handler(), ReadHeaderTimeout: readHeaderTimeout}
	r.srv, r.ln = srv, ln
	// Serve returns http.ErrServerClosed once Stop closes it.
	go func() { _ = srv.Serve(ln) }()
}

// faults is the first interceptor: it counts registrations, runs the
// injected faults, and drops every request while the registry is down.
func (r *Registry) faults(w http.ResponseWriter, req *http.Request) bool {
	if _, ok := registrationSubject(req); ok {
		n := r.registrations.Add(1)
		if fn := r.onRegister.Load(); fn != nil {
			(*fn)(int(n))
		}
		if n == r.crashAt.Load() {
			r.down.Store(true)
		}
		if n == r.failAt.Load() {
			respondError(w, http.StatusInternalServerError, sr.ErrStoreError.Code, "store error (injected)")
			return true
		}
	}
	if !r.down.Load() {
		return false
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return true
		}
	}
	respondError(w, http.StatusServiceUnavailable, sr.ErrStoreError.Code, "registry down (injected)")
	return true
}

// route sends a request that names a context to that context's srfake.
func (r *Registry) route(w http.ResponseWriter, req *http.Request) bool {
	c := pathContext(req.URL.Path)
	if c == "" {
		return false
	}
	r.Context(c).Handler().ServeHTTP(w, req)
	return true
}

// logImport records a version written in IMPORT mode.
func (r *Registry) logImport(subject string, version, id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.imports = append(r.imports, fmt.Sprintf("%s v%d id%d", subject, version, id))
}
