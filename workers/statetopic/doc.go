// Package statetopic keeps __mirror_state, the compacted copy of Postgres on
// the destination cluster: the Relay publishes outbox rows in commit order
// (one instance at a time, by advisory lock) plus recent checkpoints, each
// preceded by the chunks of its partition's offset map that changed; when
// the destination lost the topic, it creates it again and publishes the
// whole state (service.QueueStateSnapshot, then every partition).
// ReadState reads the latest value of every key for kmirror restore
// (DestinationEnds serves restore --verify).
//
// Imports: service (record shapes, the topic name), repo, internal
// infrastructure. No other workers package.
package statetopic
