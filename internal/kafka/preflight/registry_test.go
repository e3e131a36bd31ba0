package preflight_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"kmirror/internal/devenv/devregistry"
	"kmirror/internal/kafka/preflight"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/testing/testnet"
)

const stringSchema = `"string"`

func newRegistry(t *testing.T, opts ...srfake.Option) *devregistry.Registry {
	t.Helper()
	r, err := devregistry.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// basicAuth is srfake's expected Authorization header for user and pass.
func basicAuth(user, pass string) srfake.Option {
	return srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

// only returns the single row of rows with check, failing the test when
// there is not exactly one.
func only(t *testing.T, rows []preflight.Result, cluster, check string) preflight.Result {
	t.Helper()
	var found []preflight.Result
	for _, r := range rows {
		if r.Cluster == cluster && r.Check == check {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s/%s row in %+v", cluster, check, rows)
	}
	return found[0]
}

func wantRow(t *testing.T, r preflight.Result, status preflight.Status, detail ...string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s/%s: status %s, want %s: %+v", r.Cluster, r.Check, r.Status, status, r)
	}
	for _, d := range detail {
		if !strings.Contains(r.Detail+" | "+r.Grant, d) {
			t.Fatalf("%s/%s lacks %q: %+v", r.Cluster, r.Check, d, r)
		}
	}
	if status != preflight.Pass && r.Grant == "" {
		t.Fatalf("%s/%s does not pass and says nothing to grant: %+v", r.Cluster, r.Check, r)
	}
}

// TestSourceRegistryRows: the source registry's row passes when the
// mirror's credentials may list its subjects, counting the checked topics'
// subjects and the regex's; missing and wrong credentials, a registry that
// is down or stopped, and one that never answers each fail the row.
func TestSourceRegistryRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := newRegistry(t, basicAuth("sr-key", "sr-secret"))
	for _, s := range []string{"orders-value", "orders-key", "payments-value", "shared.Money", "other-value"} {
		if _, _, err := reg.Context("").RegisterSchema(s, sr.Schema{Schema: stringSchema}); err != nil {
			t.Fatal(err)
		}
	}
	good := schemaregistry.Config{URLs: []string{reg.URL()}, Username: "sr-key", Password: "sr-secret"}

	rows := preflight.CheckSourceRegistry(ctx, good, []string{"orders", "payments", "refunds"}, `shared\..*`)
	wantRow(t, only(t, rows, "source registry", "read subjects"), preflight.Pass, "5 subject(s) listed to user sr-key",
		"the checked topics have 3 of them, to be copied: orders-key, orders-value, payments-value",
		"schema.subjects.include selects 1 more: shared.Money")
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	rows = preflight.CheckSourceRegistry(ctx, good, []string{"refunds"}, "")
	wantRow(t, only(t, rows, "source registry", "read subjects"), preflight.Pass, "none is a checked topic's")

	noCreds := schemaregistry.Config{URLs: []string{reg.URL()}}
	wantRow(t, only(t, preflight.CheckSourceRegistry(ctx, noCreds, []string{"orders"}, ""), "source registry", "read subjects"),
		preflight.Fail, "asks for credentials, and none are set (HTTP 401)", "source.schema_registry")
	wrong := good
	wrong.Password = "not-the-secret"
	r := only(t, preflight.CheckSourceRegistry(ctx, wrong, []string{"orders"}, ""), "source registry", "read subjects")
	wantRow(t, r, preflight.Fail, "denied user sr-key (HTTP 403)", "source.schema_registry")
	if strings.Contains(r.Detail+r.Grant, "not-the-secret") {
		t.Fatalf("a row quotes the password: %+v", r)
	}

	reg.SetDown(true)
	wantRow(t, only(t, preflight.CheckSourceRegistry(ctx, good, []string{"orders"}, ""), "source registry", "read subjects"),
		preflight.Fail, "cannot reach the Schema Registry at "+reg.URL()+" within 10s")
	reg.SetDown(false)
	reg.Stop()
	down := only(t, preflight.CheckSourceRegistry(ctx, good, []string{"orders"}, ""), "source registry", "read subjects")
	wantRow(t, down, preflight.Fail, "cannot reach the Schema Registry at "+reg.URL())
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}

	// A registry that never answers fails within its timeout.
	hole := testnet.NewBlackhole(t)
	slow := schemaregistry.Config{URLs: []string{"http://" + hole.Addr()}, RequestTimeout: 200 * time.Millisecond}
	start := time.Now()
	wantRow(t, only(t, preflight.CheckSourceRegistry(ctx, slow, []string{"orders"}, ""), "source registry", "read subjects"),
		preflight.Fail, "cannot reach the Schema Registry at http://"+hole.Addr()+" within 200ms")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a registry that never answers held the check %s", took)
	}

	// A web server that is no registry reads as one that cannot be
	// reached, and its answer is not quoted.
	web := newWebServer(t, http.StatusNotFound, "<html>internal page</html>")
	r = only(t, preflight.CheckSourceRegistry(ctx, schemaregistry.Config{URLs: []string{web}}, []string{"orders"}, ""),
		"source registry", "read subjects")
	wantRow(t, r, preflight.Fail, "cannot reach the Schema Registry at "+web)
	if strings.Contains(r.Detail, "internal page") {
		t.Fatalf("a row quotes a web server's page: %+v", r)
	}
}

func newWebServer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// modeRequests records the subjects of the mode requests a registry gets.
type modeRequests struct {
	mu  sync.Mutex
	put []string
	del []string
}

func (m *modeRequests) intercept(_ http.ResponseWriter, req *http.Request) bool {
	subject, ok := strings.CutPrefix(req.URL.Path, "/mode/")
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch req.Method {
	case http.MethodPut:
		m.put = append(m.put, subject)
	case http.MethodDelete:
		m.del = append(m.del, subject)
	}
	return false
}

func (m *modeRequests) puts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.put...)
}

func (m *modeRequests) dels() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.del...)
}

// noModeLeft fails the test when subject has a mode of its own on reg.
func noModeLeft(t *testing.T, reg *devregistry.Registry, subject string) {
	t.Helper()
	resp, err := http.Get(reg.URL() + "/mode/" + subject + "?defaultToGlobal=false")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the probe subject %s keeps a mode: HTTP %d %v", subject, resp.StatusCode, body)
	}
}

// refuse answers a registry's mode requests of method with status and
// code.
func refuse(method string, status, code int, msg string) srfake.Interceptor {
	return func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method != method || !strings.HasPrefix(req.URL.Path, "/mode") {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
		return true
	}
}

// TestDestinationRegistryRows: the destination registry's rows pass when
// IMPORT mode can be set, and the probe subject keeps no mode afterwards,
// in the mirror's registry context too; a registry whose mode changes are
// disabled, one that denies them, wrong credentials and a registry that is
// down each fail, and a probe whose mode cannot be removed warns.
func TestDestinationRegistryRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("import allowed", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		var modes modeRequests
		reg.Context("").Intercept(modes.intercept)
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		wantRow(t, only(t, rows, "destination registry", "read modes"), preflight.Pass, "READWRITE")
		wantRow(t, only(t, rows, "destination registry", "import mode"), preflight.Pass, "IMPORT mode set and removed on the probe subject _kmirror-preflight-")
		if len(rows) != 2 {
			t.Fatalf("rows %+v", rows)
		}
		puts := modes.puts()
		if len(puts) != 1 || !strings.HasPrefix(puts[0], preflight.ProbeSubjectPrefix) || !strings.Contains(rows[1].Detail, puts[0]) {
			t.Fatalf("mode set on %v, want one probe subject named in the row", puts)
		}
		noModeLeft(t, reg, puts[0])
		if modes.dels()[0] != puts[0] {
			t.Fatalf("deleted the mode of %v, set %v", modes.dels(), puts)
		}
		// Another check probes another subject.
		preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		if p := modes.puts(); len(p) != 2 || p[1] == p[0] {
			t.Fatalf("probe subjects %v", p)
		}
	})

	t.Run("in a context", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		var modes modeRequests
		reg.Context(".east").Intercept(modes.intercept)
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, ".east")
		wantRow(t, only(t, rows, "destination registry", "import mode"), preflight.Pass, ":.east:_kmirror-preflight-")
		puts := modes.puts()
		if len(puts) != 1 || !strings.HasPrefix(puts[0], ":.east:"+preflight.ProbeSubjectPrefix) {
			t.Fatalf("mode set on %v, want a probe subject in .east", puts)
		}
		noModeLeft(t, reg, puts[0])
	})

	t.Run("mode changes disabled", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		var modes modeRequests
		reg.Context("").Intercept(modes.intercept)
		// Confluent's answer with mode.mutability=false.
		reg.Context("").Intercept(refuse(http.MethodPut, http.StatusUnprocessableEntity, sr.ErrOperationNotPermitted.Code,
			"Mode changes are not allowed"))
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		wantRow(t, only(t, rows, "destination registry", "read modes"), preflight.Pass)
		wantRow(t, only(t, rows, "destination registry", "import mode"), preflight.Fail,
			"does not allow mode changes (HTTP 422, error 42205: Mode changes are not allowed)", "IMPORT mode", "mode.mutability=true")
		if d := modes.dels(); len(d) != 0 {
			t.Fatalf("a refused mode was deleted: %v", d)
		}
	})

	t.Run("mode changes denied", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		reg.Context("").Intercept(refuse(http.MethodPut, http.StatusForbidden, 40301, "User is denied operation Write on Subject"))
		cfg := schemaregistry.Config{URLs: []string{reg.URL()}, Username: "kmirror", Password: "x"}
		wantRow(t, only(t, preflight.CheckDestinationRegistry(ctx, cfg, ""), "destination registry", "import mode"), preflight.Fail,
			"refused user kmirror setting IMPORT mode on a subject (HTTP 403)", "the right to change subject modes for user kmirror")
	})

	t.Run("wrong credentials", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t, basicAuth("kmirror", "right"))
		cfg := schemaregistry.Config{URLs: []string{reg.URL()}, Username: "kmirror", Password: "wrong"}
		rows := preflight.CheckDestinationRegistry(ctx, cfg, "")
		wantRow(t, only(t, rows, "destination registry", "read modes"), preflight.Fail, "denied user kmirror (HTTP 403)",
			"--destination-schema-registry-url")
		if len(rows) != 1 {
			t.Fatalf("an import was tried after the read failed: %+v", rows)
		}
	})

	t.Run("down", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		reg.SetDown(true)
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		wantRow(t, only(t, rows, "destination registry", "read modes"), preflight.Fail, "cannot reach the Schema Registry at "+reg.URL())
	})

	t.Run("mode change failed in the registry", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		var modes modeRequests
		reg.Context("").Intercept(modes.intercept)
		// A 5xx may be applied later: the probe's mode is deleted all
		// the same.
		reg.Context("").Intercept(refuse(http.MethodPut, http.StatusInternalServerError, sr.ErrOperationTimeout.Code, "timed out"))
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		wantRow(t, only(t, rows, "destination registry", "import mode"), preflight.Fail,
			"answered with an error: HTTP 500, error 50002: timed out")
		if puts, dels := modes.puts(), modes.dels(); len(puts) != 1 || len(dels) != 1 || dels[0] != puts[0] {
			t.Fatalf("set %v, deleted %v: want the probe's mode deleted", puts, dels)
		}
	})

	t.Run("no fallback to the global mode", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		reg.Context("").Intercept(refuse(http.MethodGet, http.StatusNotFound, sr.ErrSubjectLevelModeNotConfigured.Code,
			"Subject does not have subject-level mode configured"))
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		wantRow(t, only(t, rows, "destination registry", "read modes"), preflight.Pass, "none of its own")
		wantRow(t, only(t, rows, "destination registry", "import mode"), preflight.Pass)
	})

	t.Run("mode kept", func(t *testing.T) {
		t.Parallel()
		reg := newRegistry(t)
		reg.Context("").Intercept(refuse(http.MethodDelete, http.StatusForbidden, 40301, "denied"))
		rows := preflight.CheckDestinationRegistry(ctx, schemaregistry.Config{URLs: []string{reg.URL()}}, "")
		wantRow(t, only(t, rows, "destination registry", "import mode"), preflight.Pass)
		wantRow(t, only(t, rows, "destination registry", "remove the probe's mode"), preflight.Warn,
			"may keep IMPORT mode", "DELETE /mode/_kmirror-preflight-")
	})
}
