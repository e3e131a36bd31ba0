package api

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"kmirror/openapi"
)

// TestSpecDocumentsEveryStatus checks the served document against the rules
// the handlers and middleware follow, so an operation added without its
// annotations fails here rather than in a client:
//   - every operation has a summary, a description and a tag, and 500;
//   - under /v1: the bearer scheme, 401, and 503 (the database) unless it
//     never reads it; a change also 403 and 429 (the rate limit), as the
//     event stream (the cap on streams); a path or query parameter 400 (a
//     NUL byte or invalid UTF-8 in it);
//   - a request body: 400, 413 and 415; a path parameter: 404;
//   - every error is application/problem+json with the Problem schema.
func TestSpecDocumentsEveryStatus(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Operations that answer without the database.
	noDatabase := map[string]bool{"whoami": true, "healthz": true}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.Summary == "" || op.Description == "" || len(op.Tags) != 1 {
				t.Errorf("%s: summary %q, description %q, tags %v", name, op.Summary, op.Description, op.Tags)
			}
			want := []int{http.StatusInternalServerError}
			if strings.HasPrefix(path, "/v1/") {
				want = append(want, http.StatusUnauthorized)
				if op.Security == nil || len(*op.Security) != 1 || (*op.Security)[0]["BearerAuth"] == nil {
					t.Errorf("%s: security %v, want BearerAuth", name, op.Security)
				}
				if method != http.MethodGet {
					want = append(want, http.StatusForbidden, http.StatusTooManyRequests)
				}
				if op.OperationID == "streamEvents" {
					want = append(want, http.StatusTooManyRequests)
				}
				for _, p := range op.Parameters {
					if p.Value != nil && (p.Value.In == "path" || p.Value.In == "query") {
						want = append(want, http.StatusBadRequest)
						break
					}
				}
			}
			if !noDatabase[op.OperationID] {
				want = append(want, http.StatusServiceUnavailable)
			}
			if op.RequestBody != nil {
				want = append(want, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
			}
			if strings.Contains(path, "{") {
				want = append(want, http.StatusNotFound)
			}
			for _, code := range want {
				if op.Responses.Status(code) == nil {
					t.Errorf("%s: no %d response", name, code)
				}
			}
			for code, resp := range op.Responses.Map() {
				n, _ := strconv.Atoi(code)
				if n < 400 {
					continue
				}
				media := resp.Value.Content.Get("application/problem+json")
				if len(resp.Value.Content) != 1 || media == nil || media.Schema.Ref != "#/components/schemas/Problem" {
					t.Errorf("%s %s: content %v, want only application/problem+json Problem", name, code, slices.Collect(maps.Keys(resp.Value.Content)))
				}
			}
		}
	}
	if ss := doc.Components.SecuritySchemes["BearerAuth"]; ss == nil || ss.Value.Type != "http" || ss.Value.Scheme != "bearer" {
		t.Errorf("BearerAuth: %+v, want an http bearer scheme", ss)
	}
	events := doc.Paths.Find("/v1/events").Get.Responses.Status(http.StatusOK).Value.Content
	if len(events) != 1 || events.Get("text/event-stream") == nil {
		t.Errorf("GET /v1/events 200: %v, want text/event-stream only", slices.Collect(maps.Keys(events)))
	}
}

// TestSpecSchemas checks what every schema must say: timestamps are
// date-time, and the maps of a merge patch take null.
func TestSpecSchemas(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.JSON)
	if err != nil {
		t.Fatal(err)
	}
	for name, ref := range doc.Components.Schemas {
		for prop, p := range ref.Value.Properties {
			if (prop == "at" || strings.HasSuffix(prop, "_at")) && p.Value.Format != "date-time" {
				t.Errorf("%s.%s: format %q, want date-time", name, prop, p.Value.Format)
			}
		}
	}
	config := doc.Components.Schemas["UpdateMirrorRequest"].Value.Properties["config"].Value
	if v := config.AdditionalProperties.Schema; v == nil || !v.Value.Nullable {
		t.Error("UpdateMirrorRequest.config: values are not nullable")
	}
	if e := doc.Components.Schemas["PartitionRow"].Value.Properties["error"].Value; !e.Nullable {
		t.Error("PartitionRow.error is not nullable")
	}
}
