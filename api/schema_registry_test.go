package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"kmirror/api"
)

// TestSchemaRegistryWriteOnly: a source's Schema Registry is created, read
// and patched over the API without any response carrying its secrets (only
// *_set); bad settings are a 400 naming the field under
// source.schema_registry and change nothing; {"urls": []} removes it.
func TestSchemaRegistryWriteOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const password, token = "registry-password-never-returned-71c", "registry-token-never-returned-0d4"
	noSecret := func(r response) {
		t.Helper()
		for _, s := range []string{password, token} {
			if strings.Contains(string(r.body), s) {
				t.Fatalf("a response carries a secret: %s", r.body)
			}
		}
	}
	r := e.do(t, http.MethodPost, "/v1/mirrors?skip_connectivity_check=true", map[string]any{"name": "m",
		"source": map[string]any{"bootstrap_servers": e.bootstrap, "schema_registry": map[string]any{
			"urls": []string{"http://registry-1:8081", "http://registry-2:8081"}, "basic_auth_username": "sr-key",
			"basic_auth_password": password}}})
	var m api.Mirror
	ok(t, r, http.StatusCreated, &m)
	noSecret(r)
	if sr := m.Source.SchemaRegistry; sr == nil || !slices.Equal(sr.URLs, []string{"http://registry-1:8081", "http://registry-2:8081"}) ||
		sr.BasicAuthUsername != "sr-key" || !sr.BasicAuthPasswordSet || sr.BearerTokenSet || sr.TLSKeyPEMSet {
		t.Fatalf("created registry %+v", sr)
	}
	noSecret(e.do(t, http.MethodGet, "/v1/mirrors/m", nil))
	noSecret(e.do(t, http.MethodGet, "/v1/mirrors", nil))

	before := e.snapshot(t)
	for _, tc := range []struct {
		patch map[string]any
		field string
	}{
		{map[string]any{"urls": []string{"registry:8081"}}, "source.schema_registry.urls"},
		{map[string]any{"bearer_token": token}, "source.schema_registry.basic_auth_username"},
		{map[string]any{"basic_auth_password": ""}, "source.schema_registry.basic_auth_password: required with basic_auth_username"},
		{map[string]any{"tls_server_name": "registry"}, "source.schema_registry.urls"},
		{map[string]any{"urls": []string{}, "basic_auth_username": "u"}, "source.schema_registry.basic_auth_username: only allowed with source.schema_registry.urls"},
	} {
		r := e.do(t, http.MethodPatch, "/v1/mirrors/m?skip_connectivity_check=true", map[string]any{"source": map[string]any{"schema_registry": tc.patch}})
		wantProblem(t, r, http.StatusBadRequest, "validation", tc.field)
		noSecret(r)
	}
	e.unchanged(t, before)

	// Replace basic auth with a bearer token: "" clears a field.
	r = e.do(t, http.MethodPatch, "/v1/mirrors/m?skip_connectivity_check=true", map[string]any{"source": map[string]any{
		"schema_registry": map[string]any{"basic_auth_username": "", "basic_auth_password": "", "bearer_token": token}}})
	ok(t, r, http.StatusOK, &m)
	noSecret(r)
	if sr := m.Source.SchemaRegistry; sr == nil || sr.BasicAuthUsername != "" || sr.BasicAuthPasswordSet || !sr.BearerTokenSet ||
		len(sr.URLs) != 2 {
		t.Fatalf("patched registry %+v", sr)
	}
	// Remove it.
	r = e.do(t, http.MethodPatch, "/v1/mirrors/m?skip_connectivity_check=true", map[string]any{"source": map[string]any{
		"schema_registry": map[string]any{"urls": []string{}}}})
	ok(t, r, http.StatusOK, &m)
	if m.Source.SchemaRegistry != nil || strings.Contains(string(r.body), "schema_registry") {
		t.Fatalf("removed registry still shown: %s", r.body)
	}
	// The schema sync config keys are mirror config keys.
	r = e.do(t, http.MethodPatch, "/v1/mirrors/m", map[string]any{"config": map[string]any{"schema.registry.context": "east"}})
	wantProblem(t, r, http.StatusBadRequest, "validation", "config.schema.registry.context")
	r = e.do(t, http.MethodPatch, "/v1/mirrors/m", map[string]any{"config": map[string]any{"schema.registry.context": ".east",
		"schema.sync.interval.ms": "60000", "schema.subjects.include": "shared\\..*"}})
	ok(t, r, http.StatusOK, &m)
	if m.EffectiveConfig["schema.registry.context"] != ".east" || m.EffectiveConfig["schema.sync.interval.ms"] != "60000" {
		t.Fatalf("effective config %v", m.EffectiveConfig)
	}
}
