// Command openapiconv converts the Swagger 2.0 document swag writes into the
// OpenAPI 3.0 document kmirror serves and generates its client from.
//
//	go run ./internal/tools/openapiconv -in openapi/swagger.json -out openapi/openapi.json
//
// Besides kin-openapi's conversion it says what Swagger 2.0 cannot:
//   - error responses (4xx, 5xx and default) whose schema is the Problem
//     model are served as application/problem+json only, whatever the
//     operation produces for success;
//   - an apiKey scheme in the Authorization header (Swagger 2.0 has no
//     bearer scheme) becomes an HTTP bearer scheme;
//   - a map property marked x-nullable-values (a swag extensions tag) gets
//     nullable values, as a merge patch's "key": null;
//   - an enum's x-enum-varnames (swag takes them from the Go constants,
//     PartitionStateFailed) lose the schema's name as a prefix (Failed),
//     so generators that name members within the enum's type do not
//     repeat it;
//   - a schema whose properties are all marked x-one-of=P (a swag
//     extensions tag) stands for "one of these": it becomes a oneOf of the
//     properties' schemas with a discriminator on P, mapped from each
//     member's enum of P (Swagger 2.0 has no oneOf);
//   - a query or path parameter whose inline enum is exactly a named enum
//     schema's refers to it instead (Swagger 2.0 parameters cannot refer
//     to a schema), so clients type it with that enum, not a copy of it;
//   - a parameter of format go-duration (swag's format attribute) gets the
//     pattern of a Go duration ("30s", "1m30s"), so a generator can check
//     it; the bound stays in the description;
//   - an operation that names no security scheme needs none, and says so
//     (security: []), as the health checks do;
//   - the servers are the document's own origin ("/") and the host the
//     annotations name, without a trailing slash.
//
// The output is indented JSON with sorted keys, so the same input always
// gives the same bytes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

const (
	problemRef       = "#/components/schemas/Problem"
	problemMediaType = "application/problem+json"
)

func main() {
	in := flag.String("in", "openapi/swagger.json", "Swagger 2.0 input")
	out := flag.String("out", "openapi/openapi.json", "OpenAPI 3.0 output")
	flag.Parse()
	if err := convertFile(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "openapiconv:", err)
		os.Exit(1)
	}
}

func convertFile(in, out string) error {
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	b, err := convert(src)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, b, 0o644)
}

// convert turns a Swagger 2.0 document into a validated OpenAPI 3.0 one.
func convert(swagger []byte) ([]byte, error) {
	var doc2 openapi2.T
	if err := json.Unmarshal(swagger, &doc2); err != nil {
		return nil, fmt.Errorf("parse Swagger 2.0: %w", err)
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, fmt.Errorf("convert to OpenAPI 3.0: %w", err)
	}
	problemErrors(doc3)
	bearerSchemes(doc3)
	nullableValues(doc3)
	enumVarNames(doc3)
	if err := oneOfs(doc3); err != nil {
		return nil, err
	}
	enumParams(doc3)
	durationPatterns(doc3)
	openOperations(doc3)
	servers(doc3)
	dropConversionMarkers(doc3)
	if err := doc3.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the converted document is invalid: %w", err)
	}
	// Marshal through a generic value so every object's keys come out
	// sorted, then indent.
	raw, err := json.Marshal(doc3)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// problemErrors makes every error response that carries a Problem use the
// application/problem+json media type, which is what the server sends.
// Swagger 2.0 has one produces list per operation, so the conversion gives
// errors the success media type (application/json, or text/event-stream for
// the event stream).
func problemErrors(doc *openapi3.T) {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.Responses == nil {
				continue
			}
			for code, resp := range op.Responses.Map() {
				if !isErrorStatus(code) || resp.Value == nil {
					continue
				}
				var schema *openapi3.SchemaRef
				for _, mt := range resp.Value.Content {
					if mt.Schema != nil && mt.Schema.Ref == problemRef {
						schema = mt.Schema
						break
					}
				}
				if schema != nil {
					resp.Value.Content = openapi3.Content{problemMediaType: &openapi3.MediaType{Schema: schema}}
				}
			}
		}
	}
}

// bearerSchemes turns each apiKey security scheme sent in the Authorization
// header into an HTTP bearer scheme, which is what it is: Swagger 2.0 can
// only call it an API key.
func bearerSchemes(doc *openapi3.T) {
	for _, ref := range doc.Components.SecuritySchemes {
		ss := ref.Value
		if ss == nil || ss.Type != "apiKey" || ss.In != "header" || !strings.EqualFold(ss.Name, "Authorization") {
			continue
		}
		ref.Value = &openapi3.SecurityScheme{Type: "http", Scheme: "bearer", Description: ss.Description,
			Extensions: ss.Extensions}
	}
}

// nullableValuesExtension marks a map property whose values may be null
// (swag's `extensions:"x-nullable-values"` tag).
const nullableValuesExtension = "x-nullable-values"

// nullableValues makes the values of each map property marked
// x-nullable-values nullable, and drops the marker.
func nullableValues(doc *openapi3.T) {
	for _, ref := range doc.Components.Schemas {
		if ref.Value == nil {
			continue
		}
		for _, prop := range ref.Value.Properties {
			p := prop.Value
			if p == nil || p.Extensions[nullableValuesExtension] != true {
				continue
			}
			delete(p.Extensions, nullableValuesExtension)
			if p.AdditionalProperties.Schema != nil && p.AdditionalProperties.Schema.Value != nil {
				values := *p.AdditionalProperties.Schema.Value
				values.Nullable = true
				p.AdditionalProperties.Schema = openapi3.NewSchemaRef("", &values)
			}
		}
	}
}

// enumVarNames strips each enum schema's name from the front of its
// x-enum-varnames and of the keys of its x-enum-comments.
func enumVarNames(doc *openapi3.T) {
	for name, ref := range doc.Components.Schemas {
		if ref.Value == nil {
			continue
		}
		ext := ref.Value.Extensions
		if names, ok := ext["x-enum-varnames"].([]any); ok {
			for i, n := range names {
				if s, ok := n.(string); ok {
					names[i] = trimTypeName(s, name)
				}
			}
		}
		if comments, ok := ext["x-enum-comments"].(map[string]any); ok {
			trimmed := make(map[string]any, len(comments))
			for k, v := range comments {
				trimmed[trimTypeName(k, name)] = v
			}
			ext["x-enum-comments"] = trimmed
		}
	}
}

// oneOfExtension marks each property of a schema that stands for a oneOf of
// the properties' schemas; its value names the discriminator property.
const oneOfExtension = "x-one-of"

// oneOfs turns each schema whose properties all carry x-one-of=P into a
// oneOf of the properties' schemas, with a discriminator on P whose mapping
// lists every value of each member's P enum. A member without a required
// enum of P, or a value two members claim, is an error: the discriminator
// would not decide.
func oneOfs(doc *openapi3.T) error {
	for _, name := range componentNames(doc.Components.Schemas) {
		s := doc.Components.Schemas[name].Value
		if s == nil || len(s.Properties) == 0 {
			continue
		}
		prop := ""
		for _, p := range s.Properties {
			var v string
			if p.Value != nil {
				v, _ = p.Value.Extensions[oneOfExtension].(string)
			}
			if v == "" || (prop != "" && v != prop) {
				prop = ""
				break
			}
			prop = v
		}
		if prop == "" {
			continue
		}
		union := &openapi3.Schema{Description: s.Description, Extensions: map[string]any{},
			Discriminator: &openapi3.Discriminator{PropertyName: prop, Mapping: map[string]openapi3.MappingRef{}}}
		for _, field := range componentNames(s.Properties) {
			ref := memberRef(s.Properties[field])
			member := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
			if ref == "" || member == nil || member.Value == nil {
				return fmt.Errorf("schema %s: %s is not a reference to a schema", name, field)
			}
			d := member.Value.Properties[prop]
			if !slices.Contains(member.Value.Required, prop) || d == nil || d.Value == nil || len(d.Value.Enum) == 0 {
				return fmt.Errorf("schema %s: member %s has no required enum %s to tell it apart", name, ref, prop)
			}
			for _, e := range d.Value.Enum {
				v := fmt.Sprint(e)
				if _, dup := union.Discriminator.Mapping[v]; dup {
					return fmt.Errorf("schema %s: %s %q is claimed by two members", name, prop, v)
				}
				union.Discriminator.Mapping[v] = openapi3.MappingRef{Ref: ref, Value: member.Value}
			}
			union.OneOf = append(union.OneOf, openapi3.NewSchemaRef(ref, member.Value))
		}
		doc.Components.Schemas[name].Value = union
	}
	return nil
}

// enumParams makes each parameter whose schema is an inline string enum
// equal, value for value, to a named enum schema refer to that schema.
func enumParams(doc *openapi3.T) {
	named := map[string]string{} // the enum's values, joined -> schema name
	for _, name := range componentNames(doc.Components.Schemas) {
		if s := doc.Components.Schemas[name].Value; s != nil && s.Type.Is("string") && len(s.Enum) > 0 {
			named[fmt.Sprint(s.Enum)] = name
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p.Value == nil || p.Value.Schema == nil || p.Value.Schema.Ref != "" || p.Value.Schema.Value == nil {
					continue
				}
				s := p.Value.Schema.Value
				if name, ok := named[fmt.Sprint(s.Enum)]; ok && len(s.Enum) > 0 && s.Type.Is("string") {
					p.Value.Schema = openapi3.NewSchemaRef("#/components/schemas/"+name, doc.Components.Schemas[name].Value)
				}
			}
		}
	}
}

// goDuration is the syntax time.ParseDuration takes for a non-negative
// duration: "0", or numbers with units ("30s", "1.5m", "1m30s").
const goDuration = `^(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`

// durationPatterns gives every parameter of format go-duration the
// pattern of one.
func durationPatterns(doc *openapi3.T) {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p.Value != nil && p.Value.Schema != nil && p.Value.Schema.Value != nil && p.Value.Schema.Value.Format == "go-duration" {
					p.Value.Schema.Value.Pattern = goDuration
				}
			}
		}
	}
}

// memberRef is the schema a property refers to: directly, or through the
// one-element allOf swag writes when a reference has extensions.
func memberRef(p *openapi3.SchemaRef) string {
	if p.Ref != "" {
		return p.Ref
	}
	if p.Value != nil && len(p.Value.AllOf) == 1 {
		return p.Value.AllOf[0].Ref
	}
	return ""
}

// componentNames returns a map's keys sorted, for a stable output.
func componentNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// trimTypeName strips typeName from the front of a constant's name, when
// something is left that can start a Go identifier.
func trimTypeName(constName, typeName string) string {
	rest, ok := strings.CutPrefix(constName, typeName)
	if !ok || rest == "" || !unicode.IsUpper(rune(rest[0])) {
		return constName
	}
	return rest
}

// openOperations gives every operation without a security requirement an
// empty one: swag cannot say "no token needed", only leave it out.
func openOperations(doc *openapi3.T) {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.Security == nil {
				op.Security = openapi3.NewSecurityRequirements()
			}
		}
	}
}

// servers lists the document's own origin first (a relative URL, so the
// docs page and clients that fetched /openapi.json call the server they
// fetched it from), then the host the annotations name (kmirror dev's
// address), without the trailing slash the conversion leaves.
func servers(doc *openapi3.T) {
	out := openapi3.Servers{{URL: "/", Description: "the kmirror server this document was fetched from"}}
	for _, s := range doc.Servers {
		if u := strings.TrimSuffix(s.URL, "/"); u != "" && u != "/" && !strings.HasPrefix(u, "/") {
			out = append(out, &openapi3.Server{URL: u, Description: "kmirror dev, and kmirror server's default --listen address"})
		}
	}
	doc.Servers = out
}

func isErrorStatus(code string) bool {
	if code == "default" {
		return true
	}
	n, err := strconv.Atoi(code)
	return err == nil && n >= 400
}

// dropConversionMarkers removes the x-originalParamName extension the
// conversion leaves on request bodies: it names the Swagger 2.0 body
// parameter and means nothing to OpenAPI 3.0 readers.
func dropConversionMarkers(doc *openapi3.T) {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				delete(op.RequestBody.Value.Extensions, "x-originalParamName")
			}
		}
	}
}
