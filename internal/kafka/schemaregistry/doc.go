// Package schemaregistry copies Schema Registry subjects from a mirror's
// source registry to the destination's, keeping every schema's id and
// version number, so that records copied byte for byte (their 5-byte
// prefix names a schema id) decode the same on both sides.
//
// It owns:
//   - Config and NewClient: one registry's connection (URLs, basic or
//     bearer auth, TLS), validated with errors that name the field.
//   - Selection: which source subjects a mirror copies (the topics'
//     TopicNameStrategy subjects, a subject regex, every subject they
//     reference) and how they are named on the destination (the mirror's
//     topic-name prefix, an optional registry context).
//   - PlanSync, Plan.Apply and Sync: read both registries, decide what the
//     destination lacks, and write it in IMPORT mode, leaving each subject
//     READONLY; a Report says what was copied and what failed, per subject.
//   - SetMode: the lifecycle's switch of destination subjects (READONLY
//     while mirrored, READWRITE after a failover).
//
// The client is franz-go's pkg/sr, from the project whose kgo, kadm and
// kfake kmirror already uses. The tests run against srfake registries, the
// destination's through internal/devenv/devregistry, which adds the IMPORT
// mode, READONLY and contexts srfake lacks (test files only: the package
// itself does not import it). Secrets arrive here as plain strings: sealing them at
// rest is the caller's job. Like the Kafka packages, this one knows nothing
// of the domain's tables; it may import only the standard library, sr and
// kafkaconn (whose PEM parsing it shares).
package schemaregistry
