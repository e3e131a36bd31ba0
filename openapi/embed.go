// Package openapi holds kmirror's generated API description: the Swagger 2.0
// document swag builds from the api package's annotations, its OpenAPI 3.0
// conversion (served at /openapi.json), and a Go client generated from it.
package openapi

import _ "embed"

// JSON is the OpenAPI 3.0 document.
//
//go:embed openapi.json
var JSON []byte
