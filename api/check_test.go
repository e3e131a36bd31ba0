package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/devenv/devregistry"
	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/preflight"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/internal/testing/testnet"
	"kmirror/service"
)

// TestCheckMirror: the preflight answers a row per check for the mirror's
// topics, or for the topics a pattern matches; a cluster that cannot be
// reached is a failed row in a 200; bad input is a 400 and an unknown
// mirror or a pattern that matches nothing a 404.
func TestCheckMirror(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{destinationIsSource: true})
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{
		"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}}), http.StatusCreated, nil)
	e.topicsAction(t, "m1", "add", "orders")

	rowOf := func(res service.CheckResult, cluster, check string) service.MirrorCheck {
		t.Helper()
		for _, c := range res.Checks {
			if c.Cluster == cluster && c.Check == check {
				return c
			}
		}
		t.Fatalf("no %s/%s row in %+v", cluster, check, res.Checks)
		return service.MirrorCheck{}
	}
	var res service.CheckResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1:check", nil), http.StatusOK, &res)
	// The destination here lets kmirror in unauthenticated and names no
	// authorizer: the one row that does not pass says read-only cannot be
	// enforced, as the data plane reports it.
	if res.Status != "warn" || len(res.Topics) != 1 || res.Topics[0] != "orders" || len(res.Checks) < 10 {
		t.Fatalf("the mirror's own topics: %+v", res)
	}
	for _, c := range res.Checks {
		if c.Status != "pass" && (c.Cluster != "destination" || c.Check != "authorizer" || c.Status != "warn") {
			t.Fatalf("a row other than the destination's authorizer did not pass: %+v", c)
		}
	}
	if r := rowOf(res, "source", "read topics"); r.Status != "pass" {
		t.Fatalf("read topics: %+v", r)
	}
	if r := rowOf(res, "destination", "create topics"); r.Status != "pass" || r.Detail != "every topic exists already" {
		t.Fatalf("create topics: %+v", r)
	}

	ok(t, e.do(t, "POST", "/v1/mirrors/m1:check", map[string]any{"topic": "pay.*", "replication_factor": 1}), http.StatusOK, &res)
	if len(res.Topics) != 1 || res.Topics[0] != "payments" {
		t.Fatalf("a pattern: %+v", res.Topics)
	}

	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1:check", map[string]any{"topic": "nothing"}), 404, "no-match")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1:check", map[string]any{"replication_factor": 0}), 400, "validation",
		"replication_factor")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1:check", map[string]any{"topics": "orders"}), 400, "unknown-field")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/nope:check", nil), 404, "not-found")

	// A source that cannot be reached is a failed row, not an error.
	proxy := testnet.NewProxy(t, strings.Split(e.bootstrap, ",")[0])
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{
		"name": "m2", "source": map[string]any{"bootstrap_servers": proxy.Addr()}}), http.StatusCreated, nil)
	proxy.Cut(testnet.Refuse)
	ok(t, e.do(t, "POST", "/v1/mirrors/m2:check", nil), http.StatusOK, &res)
	if r := rowOf(res, "source", "connect"); res.Status != "fail" || r.Status != "fail" || r.Grant == "" {
		t.Fatalf("an unreachable source: %+v", res)
	}
}

// TestCheckMirrorRegistries: a mirror that names a source Schema Registry
// gets a row for it, counting its topics' subjects, and rows for the
// server's destination registry, whose IMPORT mode is probed; a server
// without a destination registry warns that schemas will not be copied,
// and a mirror without a registry gets no registry rows.
func TestCheckMirrorRegistries(t *testing.T) {
	t.Parallel()
	newRegistry := func() *devregistry.Registry {
		r, err := devregistry.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	source, destination := newRegistry(), newRegistry()
	if _, _, err := source.Context("").RegisterSchema("orders-value", sr.Schema{Schema: `"string"`}); err != nil {
		t.Fatal(err)
	}
	registryRows := func(res service.CheckResult) map[string]service.MirrorCheck {
		rows := map[string]service.MirrorCheck{}
		for _, c := range res.Checks {
			if strings.HasSuffix(c.Cluster, " registry") {
				rows[c.Cluster+"/"+c.Check] = c
			}
		}
		return rows
	}
	for _, withDestination := range []bool{true, false} {
		opts := envOpts{destinationIsSource: true}
		if withDestination {
			opts.destinationRegistry = &schemaregistry.Config{URLs: []string{destination.URL()}}
		}
		e := newEnvWith(t, opts)
		ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m1", "source": map[string]any{
			"bootstrap_servers": e.bootstrap, "schema_registry": map[string]any{"urls": []string{source.URL()}}}}), http.StatusCreated, nil)
		e.topicsAction(t, "m1", "add", "orders")
		var res service.CheckResult
		ok(t, e.do(t, "POST", "/v1/mirrors/m1:check", nil), http.StatusOK, &res)
		rows := registryRows(res)
		if r := rows["source registry/read subjects"]; r.Status != "pass" ||
			!strings.Contains(r.Detail, "the checked topics have 1 of them, to be copied: orders-value") {
			t.Fatalf("destination registry %v: the source registry's row: %+v", withDestination, res.Checks)
		}
		if withDestination {
			if len(rows) != 3 || rows["destination registry/read modes"].Status != "pass" ||
				rows["destination registry/import mode"].Status != "pass" || res.Status != "warn" {
				t.Fatalf("with a destination registry: %+v", res)
			}
		} else {
			r := rows["destination registry/connect"]
			if len(rows) != 2 || r.Status != "warn" || !strings.Contains(r.Detail, "schemas will not be copied") ||
				!strings.Contains(r.Grant, "--destination-schema-registry-url") {
				t.Fatalf("without a destination registry: %+v", res)
			}
		}

		// A mirror without a registry: no registry rows.
		ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m2", "source": map[string]any{
			"bootstrap_servers": e.bootstrap}}), http.StatusCreated, nil)
		ok(t, e.do(t, "POST", "/v1/mirrors/m2:check", map[string]any{"topic": "orders"}), http.StatusOK, &res)
		if rows := registryRows(res); len(rows) != 0 {
			t.Fatalf("a mirror without a registry got registry rows: %+v", rows)
		}
	}

	// The source registry down fails its row, and the check still answers.
	source.SetDown(true)
	e := newEnvWith(t, envOpts{destinationIsSource: true})
	ok(t, e.do(t, "POST", "/v1/mirrors?skip_connectivity_check=true", map[string]any{"name": "m1", "source": map[string]any{
		"bootstrap_servers": e.bootstrap, "schema_registry": map[string]any{"urls": []string{source.URL()}}}}), http.StatusCreated, nil)
	var res service.CheckResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1:check", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if r := registryRows(res)["source registry/read subjects"]; res.Status != "fail" || r.Status != "fail" ||
		!strings.Contains(r.Detail, "cannot reach the Schema Registry at "+source.URL()) {
		t.Fatalf("a source registry that is down: %+v", res)
	}
}

// failingPreflight fails one check, as a destination without WRITE would.
type failingPreflight struct{}

func (failingPreflight) Check(context.Context, kafkaconn.Config, kafkaconn.Config, []service.PreflightTopic, int) []preflight.Result {
	return []preflight.Result{
		{Cluster: "source", Check: "read topics", Status: preflight.Pass, Detail: "allowed on all 1"},
		{Cluster: "destination", Check: "write topics", Status: preflight.Fail, Detail: "not allowed on orders",
			Grant: "WRITE on topic orders"},
	}
}

// TestAddRefusedByPreflight: topics:add runs the checks and, when one
// fails, answers 409 preflight-failed listing the failed rows, and adds
// nothing; skip_checks adds anyway.
func TestAddRefusedByPreflight(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{preflight: failingPreflight{}})
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{
		"name": "m1", "source": map[string]any{"bootstrap_servers": e.bootstrap}}), http.StatusCreated, nil)
	p := wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add", map[string]any{"topic": "orders"}), 409,
		"preflight-failed", "destination write topics: not allowed on orders (grant WRITE on topic orders)")
	if len(p.Checks) != 1 || p.Checks[0].Check != "write topics" || p.Checks[0].Grant != "WRITE on topic orders" {
		t.Fatalf("the problem's checks: %+v", p.Checks)
	}
	var rows int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM mirror_topics WHERE mirror = 'm1'`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("a refused add left %d topic row(s) (%v)", rows, err)
	}
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?skip_checks=true", map[string]any{"topic": "orders"}), http.StatusOK, nil)
}
