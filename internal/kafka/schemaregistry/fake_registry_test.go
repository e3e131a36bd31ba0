package schemaregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// fakeRegistry is a destination registry for the tests: srfake, plus the
// three things a real registry has that srfake lacks, each done in an
// interceptor and kept to the minimum the sync needs:
//
//   - IMPORT mode. srfake stores a subject's mode but never reads it, and
//     refuses an id in a registration body (an unknown field to it). The
//     import interceptor takes a registration that names an id and a
//     version when the subject is in IMPORT mode, and places it with
//     srfake's own SeedSchema (a fresh id) or RegisterSchema (an id already
//     there with the same schema); it refuses an id that holds another
//     schema, as the real registry does. It also refuses any registration
//     in READONLY mode, which srfake does not enforce either.
//   - Contexts with their own ids. srfake keeps one id space for all
//     contexts, so two contexts cannot hold the same id. The router sends
//     every request that names a context (a /contexts/<c>/ path, or a
//     :<c>: qualified subject) to a separate srfake for that context.
//   - A crash. When down, every request's connection is dropped with no
//     answer, as a registry that died would; its state is kept for when
//     it comes back, as a real one keeps it in its _schemas topic.
type fakeRegistry struct {
	front *srfake.Registry // the default context, served over HTTP

	mu       sync.Mutex
	contexts map[string]*srfake.Registry
	imports  []string // "<subject> v<version> id<id>", in the order written

	down       atomic.Bool
	crashAt    atomic.Int64 // the registry goes down at this import (1-based); 0 never
	failAt     atomic.Int64 // this import (1-based) answers 500; 0 never
	importSeen atomic.Int64
	// onImport, when set, runs as each registration arrives, with its
	// 1-based count.
	onImport atomic.Pointer[func(n int64)]
}

func newFakeRegistry(t *testing.T, opts ...srfake.Option) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{front: srfake.New(opts...), contexts: map[string]*srfake.Registry{}}
	f.front.Intercept(f.faults)
	f.front.Intercept(f.route)
	f.front.Intercept(f.importer(f.front))
	t.Cleanup(f.front.Close)
	return f
}

// client returns a kmirror client for the registry, built as production
// builds one.
func (f *fakeRegistry) client(t *testing.T) *sr.Client {
	t.Helper()
	cl, err := NewClient(Config{URLs: []string{f.front.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// registry returns the srfake holding a context's subjects ("" for the
// default context), for seeding and for checks that must not go through
// HTTP (while the registry is down).
func (f *fakeRegistry) registry(regContext string) *srfake.Registry {
	if regContext == "" || regContext == "." {
		return f.front
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	reg, ok := f.contexts[regContext]
	if !ok {
		reg = srfake.NewRegistry()
		reg.Intercept(f.importer(reg))
		f.contexts[regContext] = reg
	}
	return reg
}

// importLog returns the imports written so far, in order.
func (f *fakeRegistry) importLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.imports)
}

func (f *fakeRegistry) faults(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := registrationSubject(r); ok {
		n := f.importSeen.Add(1)
		if hook := f.onImport.Load(); hook != nil {
			(*hook)(n)
		}
		if n == f.crashAt.Load() {
			f.down.Store(true)
		}
		if n == f.failAt.Load() {
			respondError(w, http.StatusInternalServerError, sr.ErrStoreError.Code, "store error (injected by the test)")
			return true
		}
	}
	if !f.down.Load() {
		return false
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return true
		}
	}
	respondError(w, http.StatusServiceUnavailable, sr.ErrStoreError.Code, "registry down (injected by the test)")
	return true
}

func (f *fakeRegistry) route(w http.ResponseWriter, r *http.Request) bool {
	c := pathContext(r.URL.Path)
	if c == "" {
		return false
	}
	f.registry(c).Handler().ServeHTTP(w, r)
	return true
}

// pathContext returns the context a request names, "" for the default.
func pathContext(p string) string {
	if rest, ok := strings.CutPrefix(p, "/contexts/"); ok {
		if name, _, ok := strings.Cut(rest, "/"); ok && name != "." {
			return name
		}
		return ""
	}
	for _, seg := range strings.Split(p, "/") {
		if rest, ok := strings.CutPrefix(seg, ":"); ok {
			if c, _, ok := strings.Cut(rest, ":"); ok && c != "." {
				return c
			}
		}
	}
	return ""
}

// registrationSubject returns the subject of a POST /subjects/{s}/versions.
func registrationSubject(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/subjects/")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "/versions")
}

// importer is the IMPORT-mode interceptor for reg (see fakeRegistry).
func (f *fakeRegistry) importer(reg *srfake.Registry) srfake.Interceptor {
	return func(w http.ResponseWriter, r *http.Request) bool {
		subject, ok := registrationSubject(r)
		if !ok {
			return false
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in sr.SubjectSchema
		if err := json.Unmarshal(body, &in); err != nil {
			return false
		}
		mode := getJSON[struct{ Mode string }](reg, "/mode/"+url.PathEscape(subject)).Mode
		switch {
		case mode == "READONLY":
			respondError(w, http.StatusUnprocessableEntity, sr.ErrOperationNotPermitted.Code, "Subject "+subject+" is in read-only mode")
			return true
		case in.ID <= 0 && mode != "IMPORT":
			return false // an ordinary registration: srfake's own
		case in.ID <= 0 || in.Version <= 0 || mode != "IMPORT":
			respondError(w, http.StatusUnprocessableEntity, sr.ErrOperationNotPermitted.Code,
				fmt.Sprintf("an id and a version are taken only in IMPORT mode, with both (mode %s, id %d, version %d)", mode, in.ID, in.Version))
			return true
		}
		if err := importVersion(reg, subject, in); err != nil {
			respondError(w, http.StatusUnprocessableEntity, sr.ErrIDDoesNotMatch.Code, err.Error())
			return true
		}
		f.mu.Lock()
		f.imports = append(f.imports, fmt.Sprintf("%s v%d id%d", subject, in.Version, in.ID))
		f.mu.Unlock()
		respond(w, http.StatusOK, map[string]int{"id": in.ID})
		return true
	}
}

// importVersion places in at its own id and version, or says why not.
func importVersion(reg *srfake.Registry, subject string, in sr.SubjectSchema) (err error) {
	if have, ok := reg.GetSchema(subject, in.Version); ok {
		if have.ID == in.ID && fakeSameSchema(have.Schema, in.Schema) {
			return nil // the same import again
		}
		return fmt.Errorf("subject %s version %d already holds id %d", subject, in.Version, have.ID)
	}
	held, found := lookupFake(reg, in.ID)
	switch {
	case !found:
		defer func() {
			// SeedSchema panics on a slot already taken or a reference
			// that is missing; the registry would answer an error.
			if p := recover(); p != nil {
				err = fmt.Errorf("import refused: %v", p)
			}
		}()
		reg.SeedSchema(subject, in.Version, in.ID, in.Schema)
		return nil
	case fakeSameSchema(held, in.Schema):
		// The id is shared with another subject. srfake reuses it through
		// RegisterSchema, which numbers the version itself: accept only
		// the version it would pick.
		next := slices.Max(append(getJSON[[]int](reg, "/subjects/"+url.PathEscape(subject)+"/versions?deleted=true"), 0)) + 1
		if next != in.Version {
			return fmt.Errorf("srfake cannot import shared id %d at version %d of %s (it would use %d)", in.ID, in.Version, subject, next)
		}
		_, _, err := reg.RegisterSchema(subject, in.Schema)
		return err
	default:
		return fmt.Errorf("schema id %d already holds a different schema", in.ID)
	}
}

func lookupFake(reg *srfake.Registry, id int) (sr.Schema, bool) {
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/schemas/ids/%d", id), nil))
	if rec.Code != http.StatusOK {
		return sr.Schema{}, false
	}
	var s sr.Schema
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		return sr.Schema{}, false
	}
	return s, true
}

// getJSON reads a path from reg's own handler; the zero value when it
// fails.
func getJSON[T any](reg *srfake.Registry, path string) T {
	var out T
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code == http.StatusOK {
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
	}
	return out
}

// fakeSameSchema is the fake registry's own comparison, kept apart from the
// package's so that a test does not grade the package with its own rule.
func fakeSameSchema(a, b sr.Schema) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, []byte(a.Schema)) != nil || json.Compact(&cb, []byte(b.Schema)) != nil {
		return a.Type == b.Type && a.Schema == b.Schema && reflect.DeepEqual(a.References, b.References)
	}
	return a.Type == b.Type && ca.String() == cb.String() && reflect.DeepEqual(a.References, b.References)
}

func respond(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func respondError(w http.ResponseWriter, status, code int, msg string) {
	respond(w, status, map[string]any{"error_code": code, "message": msg})
}
