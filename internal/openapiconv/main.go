// Command openapiconv converts the Swagger 2.0 document swag writes into the
// OpenAPI 3.0 document kmirror serves and generates its client from.
//
//	go run ./internal/openapiconv -in openapi/swagger.json -out openapi/openapi.json
//
// Besides kin-openapi's conversion it fixes what Swagger 2.0 cannot say:
// error responses (4xx, 5xx and default) whose schema is the Problem model
// are served as application/problem+json only, whatever the operation
// produces for success. The output is indented JSON with sorted keys, so the
// same input always gives the same bytes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"

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
