// Package partition is the data plane's engine: the Engine runs one
// worker per leased mirror partition and owns what the instance's workers
// share: the Kafka clients (one idempotent destination producer, one
// read_committed fetcher per mirror, fetcher.go), the checkpointer
// (checkpointer.go), the desired-state cache, the state changes and row
// reads made in groups (grouped_statements.go over groups.go), the reads
// and topic-row writes shared by partitions preparing together
// (shared_reads.go, topic_row_writes.go, coalesce.go), the prepare slots,
// destination topics and their read-only ACLs (destination_topics.go), the
// destination watch and ended sessions' copies (destination_watch.go,
// unsettled.go), and end offsets for lag (offsets_refresh.go,
// foreign_ends.go).
//
// Its sub-packages:
//   - worker: the per-partition state machine (alignment, mirroring,
//     pause, stop), which reaches the engine only through worker.Engine;
//     workerEngine (worker_engine.go) is the engine's side of it.
//   - produce: the producer's options, the gate that bounds its buffered
//     records and a session's count of its results.
//   - metrics: the data plane's Prometheus series.
//
// The fetcher, the checkpointer and the grouping of reads and statements
// stay here: the engine owns, starts and watches them, and a worker
// touches each through one or two calls: its fetch through
// worker.Engine.Fetch, its statements through Row and Transition, the
// checkpointer as the worker.Checkpoints it is given.
//
// Imports: lease (Lease, Key; the Engine is a lease.PartitionRunner), its
// own sub-packages worker, produce and metrics, service (the state machine
// and every state write), repo, internal infrastructure. Not metadatasync
// or statetopic.
package partition
