// Package partition is the data plane: the Engine runs one worker per leased
// mirror partition and owns the instance's shared Kafka clients (one
// idempotent destination producer, one read_committed fetcher per mirror).
// A worker moves its partition's actual state toward the topic's desired
// state in valid steps: alignment in PREPARING (align.go), copying in
// MIRRORING (mirroring_session.go, fetcher.go), checkpoints
// (checkpointer.go), read-only ACLs, recreate, the source topic identity
// check, and end offsets for lag (offsets_refresh.go).
//
// Its sub-packages: produce holds the producer's options, the gate that
// bounds its buffered records and a session's count of its results;
// metrics the data plane's Prometheus series.
//
// Imports: lease (Lease, Key; the Engine is a lease.PartitionRunner), its
// own sub-packages produce and metrics, service (the state machine and every state
// write), repo, internal infrastructure. Not metadatasync or statetopic.
package partition
