package openapi

// Regenerate everything with `go generate ./openapi`, in this order:
//  1. swag reads the annotations in api/ (and the models in service/) and
//     writes the Swagger 2.0 document, swagger.json and swagger.yaml;
//  2. openapiconv converts it to OpenAPI 3.0, openapi.json (served at
//     /openapi.json and embedded below);
//  3. oapi-codegen generates the Go client, client/client.gen.go.
// .ci/check-generated fails when the checked-in files differ from a fresh run.
// The TypeScript package's types follow with `npm run generate --prefix
// sdk/typescript` (TestTypeScriptClient fails while they differ).

//go:generate go tool swag init --quiet --generalInfo server.go --dir ../api,../service --output . --outputTypes json,yaml --parseInternal --requiredByDefault
//go:generate go run ../internal/tools/openapiconv -in swagger.json -out openapi.json
//go:generate go tool oapi-codegen -config client/cfg.yaml openapi.json
