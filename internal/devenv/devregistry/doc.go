// Package devregistry is the in-memory Schema Registry that `kmirror dev`
// and the tests run kmirror against: franz-go's srfake, served on a loopback
// port of its own, plus the little a real registry does that srfake does not
// and that kmirror's Schema Registry sync (internal/kafka/schemaregistry)
// relies on. Each addition is an srfake interceptor kept to the minimum the
// sync needs:
//
//   - IMPORT mode with ids kept. srfake stores a subject's mode but never
//     reads it, and takes no id from a registration body. The importer
//     takes a registration that names an id and a version when the subject
//     is in IMPORT mode and places it there with srfake's own SeedSchema
//     (or RegisterSchema, for an id another subject already holds with the
//     same schema); it refuses an id that holds another schema, as the real
//     registry does.
//   - READONLY. srfake does not enforce it; the importer refuses every
//     registration into a READONLY subject.
//   - Contexts with their own ids. srfake keeps one id space for all
//     contexts, so two contexts cannot hold the same id. The router sends
//     each request that names a context (a /contexts/<c>/ path, or a
//     :<c>: qualified subject) to a separate srfake for that context.
//     IMPORT is taken for qualified subjects only, as kmirror writes them;
//     a registration under a /contexts/<c>/ path is srfake's own.
//   - Faults, for tests: a registry that is down (each connection dropped
//     unanswered, its state kept, as a crashed registry keeps its _schemas
//     topic), a crash or a 500 at the nth registration, and a stop and
//     start at the same URL.
//
// It is a development and test tool: no durability, no auth beyond
// srfake's WithAuth, plain HTTP on loopback. It imports only the standard
// library and srfake, so that any package's tests, the Schema Registry
// sync's own included, can use it.
package devregistry
