package devregistry

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

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// importer is the IMPORT-mode and READONLY interceptor for reg (see the
// package doc).
func (r *Registry) importer(reg *srfake.Registry) srfake.Interceptor {
	return func(w http.ResponseWriter, req *http.Request) bool {
		subject, ok := registrationSubject(req)
		if !ok {
			return false
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return false
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
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
		r.logImport(subject, in.Version, in.ID)
		respond(w, http.StatusOK, map[string]int{"id": in.ID})
		return true
	}
}

// importVersion places in at its own id and version, or says why not.
func importVersion(reg *srfake.Registry, subject string, in sr.SubjectSchema) (err error) {
	if have, ok := reg.GetSchema(subject, in.Version); ok {
		if have.ID == in.ID && sameSchema(have.Schema, in.Schema) {
			return nil // the same import again
		}
		return fmt.Errorf("subject %s version %d already holds id %d", subject, in.Version, have.ID)
	}
	held, found := schemaByID(reg, in.ID)
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
	case sameSchema(held, in.Schema):
		// The id is shared with another subject. srfake reuses it through
		// RegisterSchema, which numbers the version itself: accept only
		// the version it would pick.
		next := slices.Max(append(getJSON[[]int](reg, "/subjects/"+url.PathEscape(subject)+"/versions?deleted=true"), 0)) + 1
		if next != in.Version {
			return fmt.Errorf("devregistry cannot import shared id %d at version %d of %s (it would use %d)", in.ID, in.Version, subject, next)
		}
		_, _, err := reg.RegisterSchema(subject, in.Schema)
		return err
	default:
		return fmt.Errorf("schema id %d already holds a different schema", in.ID)
	}
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

func schemaByID(reg *srfake.Registry, id int) (sr.Schema, bool) {
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

// sameSchema is the registry's own comparison (type, compacted text,
// references), kept apart from the sync's so that a test does not grade the
// sync with its own rule.
func sameSchema(a, b sr.Schema) bool {
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
