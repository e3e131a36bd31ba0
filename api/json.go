package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"kmirror/service"
)

// maxBodyBytes caps every request body.
const maxBodyBytes = 1 << 20

// bodyError is a request body that cannot be read as the expected JSON.
type bodyError struct {
	kind   problemKind
	detail string
}

func (e *bodyError) Error() string { return e.detail }

// readJSON decodes a request body into dst: at most 1 MiB, content type
// application/json, no unknown fields, no key twice, exactly one value, and
// no string PostgreSQL cannot store (a NUL byte).
func readJSON(r *http.Request, dst any) error {
	// Only application/json: a "+json" type or none at all is refused, so
	// a body is never read as JSON that the client did not declare so.
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		if ct == "" {
			return &bodyError{kindMediaType, "the request has no Content-Type; send application/json"}
		}
		return &bodyError{kindMediaType, fmt.Sprintf("content type %q is not supported; send application/json", ct)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &bodyError{kindTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBodyBytes)}
		}
		return &bodyError{kindMalformedJSON, "cannot read request body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &bodyError{kindMalformedJSON, "request body is empty; send a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	// dec.More is false before a stray '}' or ']', so the rest is checked
	// byte by byte (else "null }" would pass).
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return &bodyError{kindMalformedJSON, "request body has data after the JSON value"}
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return &bodyError{kindMalformedJSON, "request body is null; send a JSON object"}
	}
	if key := duplicateKey(body); key != "" {
		return &bodyError{kindMalformedJSON, fmt.Sprintf("key %q appears twice in one object (keys are matched without regard to case)", key)}
	}
	if field := badTextField(reflect.ValueOf(dst), ""); field != "" {
		return &service.ValidationError{Fields: []service.FieldError{{Field: field,
			Message: "contains a NUL character (\\u0000), which cannot be stored"}}}
	}
	return nil
}

func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return &bodyError{kindMalformedJSON, fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, err)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &bodyError{kindMalformedJSON, "malformed JSON: unexpected end of input"}
	case errors.As(err, &typeErr):
		where := "the request body"
		if typeErr.Field != "" {
			where = fmt.Sprintf("field %q", typeErr.Field)
		}
		return &bodyError{kindValidation, fmt.Sprintf("%s must be %s, not JSON %s", where, jsonKind(typeErr.Type), typeErr.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &bodyError{kindUnknownField, strings.TrimPrefix(err.Error(), "json: ")}
	}
	return &bodyError{kindMalformedJSON, "malformed JSON: " + err.Error()}
}

// writeJSON writes v as compact JSON. Not indented: on a large describe
// page the indentation would be a large share of the handler's CPU and of
// the body's bytes (`| jq` prints it for a person).
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeJSONType(w, "application/json", status, v)
}

func writeJSONType(w http.ResponseWriter, contentType string, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// jsonKind names a Go type as a JSON client knows it, never by its Go name.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}
