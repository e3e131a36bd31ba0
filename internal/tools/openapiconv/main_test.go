package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestConvert converts the checked-in Swagger document and checks what the
// conversion must fix and keep.
func TestConvert(t *testing.T) {
	src, err := os.ReadFile("../../../openapi/swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := convert(src)
	if err != nil {
		t.Fatal(err)
	}
	again, err := convert(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Fatal("two conversions of the same input differ")
	}
	if bytes.Contains(out, []byte("x-originalParamName")) {
		t.Error("output keeps the x-originalParamName conversion marker")
	}

	doc, err := openapi3.NewLoader().LoadFromData(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, resp := range op.Responses.Map() {
				for mt, media := range resp.Value.Content {
					isProblem := media.Schema != nil && media.Schema.Ref == problemRef
					if isErrorStatus(code) && isProblem && mt != problemMediaType {
						t.Errorf("%s %s %s: a Problem as %s, want %s", method, path, code, mt, problemMediaType)
					}
					if !isErrorStatus(code) && mt == problemMediaType {
						t.Errorf("%s %s %s: success as %s", method, path, code, mt)
					}
				}
			}
		}
	}

	events := doc.Paths.Find("/v1/events").Get
	if events == nil {
		t.Fatal("no GET /v1/events")
	}
	if ok := events.Responses.Status(200).Value.Content.Get("text/event-stream"); ok == nil {
		t.Error("GET /v1/events 200 is not text/event-stream")
	}
	if bad := events.Responses.Status(400).Value.Content.Get(problemMediaType); bad == nil {
		t.Error("GET /v1/events 400 is not application/problem+json")
	}

	if ss := doc.Components.SecuritySchemes["BearerAuth"]; ss == nil || ss.Value.Type != "http" || ss.Value.Scheme != "bearer" {
		t.Errorf("BearerAuth is not an http bearer scheme: %+v", ss)
	}
	if sec := doc.Paths.Find("/healthz").Get.Security; sec == nil || len(*sec) != 0 {
		t.Errorf("GET /healthz security %v, want [] (no token needed)", sec)
	}
	config := doc.Components.Schemas["UpdateMirrorRequest"].Value.Properties["config"].Value
	if v := config.AdditionalProperties.Schema; v == nil || !v.Value.Nullable || config.Extensions[nullableValuesExtension] != nil {
		t.Errorf("UpdateMirrorRequest.config: values not nullable, or the marker kept: %+v", config)
	}
	if names := doc.Components.Schemas["PartitionState"].Value.Extensions["x-enum-varnames"]; !strings.Contains(fmt.Sprint(names), "Mirroring") ||
		strings.Contains(fmt.Sprint(names), "PartitionState") {
		t.Errorf("PartitionState x-enum-varnames %v, want names without the type's", names)
	}
	for _, p := range doc.Paths.Find("/v1/partitions").Get.Parameters {
		if p.Value.Name == "state" && p.Value.Schema.Ref != "#/components/schemas/PartitionState" {
			t.Errorf("GET /v1/partitions state: schema %+v, want a reference to PartitionState", p.Value.Schema)
		}
	}
	re := regexp.MustCompile(goDuration)
	for _, ok := range []string{"0", "30s", "5m", "1m30s", "1.5m", "250ms", "2h"} {
		if !re.MatchString(ok) {
			t.Errorf("the Go duration pattern refuses %q", ok)
		}
	}
	for _, bad := range []string{"", "30", "soon", "-1s", "1 m", "5m "} {
		if re.MatchString(bad) {
			t.Errorf("the Go duration pattern takes %q", bad)
		}
	}
	for _, path := range []string{"/v1/mirrors/{mirror}/topics:add", "/v1/mirrors/{mirror}/topics:pause"} {
		for _, p := range doc.Paths.Find(path).Post.Parameters {
			if p.Value.Name == "wait" && p.Value.Schema.Value.Pattern != goDuration {
				t.Errorf("POST %s wait: pattern %q, want a Go duration's", path, p.Value.Schema.Value.Pattern)
			}
		}
	}
	if len(doc.Servers) != 2 || doc.Servers[0].URL != "/" || strings.HasSuffix(doc.Servers[1].URL, "/") {
		t.Errorf("servers %+v", doc.Servers)
	}
}

// TestOneOfs: a schema whose properties are all marked x-one-of becomes a
// oneOf of their schemas with a discriminator mapped from the members'
// enums; a member without the enum, or two claiming one value, fail.
func TestOneOfs(t *testing.T) {
	member := func(kinds ...string) string {
		return fmt.Sprintf(`{"type":"object","required":["kind"],"properties":{"kind":{"type":"string","enum":["%s"]}}}`,
			strings.Join(kinds, `","`))
	}
	doc := func(a, b string) []byte {
		return []byte(`{"swagger":"2.0","info":{"title":"t","version":"1"},
			"paths":{"/u":{"get":{"responses":{"200":{"description":"u","schema":{"$ref":"#/definitions/U"}}}}}},
			"definitions":{
			"A":` + a + `,"B":` + b + `,
			"U":{"type":"object","properties":{
				"a":{"allOf":[{"$ref":"#/definitions/A"}],"x-one-of":"kind"},
				"b":{"allOf":[{"$ref":"#/definitions/B"}],"x-one-of":"kind"}}}}}`)
	}
	out, err := convert(doc(member("a"), member("b1", "b2")))
	if err != nil {
		t.Fatal(err)
	}
	d, err := openapi3.NewLoader().LoadFromData(out)
	if err != nil {
		t.Fatal(err)
	}
	u := d.Components.Schemas["U"].Value
	if len(u.OneOf) != 2 || u.OneOf[0].Ref != "#/components/schemas/A" || len(u.Properties) != 0 ||
		u.Discriminator == nil || u.Discriminator.PropertyName != "kind" || len(u.Discriminator.Mapping) != 3 ||
		u.Discriminator.Mapping["b2"].Ref != "#/components/schemas/B" {
		t.Errorf("U: %s", out)
	}
	if _, err := convert(doc(member("a"), member("a", "b"))); err == nil || !strings.Contains(err.Error(), `"a" is claimed by two members`) {
		t.Errorf("a value claimed twice: %v", err)
	}
	if _, err := convert(doc(member("a"), `{"type":"object"}`)); err == nil || !strings.Contains(err.Error(), "no required enum kind") {
		t.Errorf("a member without the enum: %v", err)
	}
}
