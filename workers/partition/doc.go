// Package partition is the data plane's engine: the Engine runs one
// worker per leased mirror partition and owns what the instance's workers
// share: the Kafka clients (one idempotent destination producer, one
// read_committed fetcher per mirror, batch_clients.go; each mirror's source
// clients, source_clients.go), the checkpointer
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
//     pause, stop), which acts only through the small ports it declares
//     (worker.Ports); worker_ports.go says which part of the engine
//     implements each. The engine never reaches into a worker or its
//     session: it tells them through channels they were given.
//   - metrics: the data plane's Prometheus series.
//
// The Kafka pieces themselves (fetch, produce with its gate and acks,
// record batches, leaders) live in internal/kafka; this package wires them
// for the instance and watches their health (batch_clients.go,
// client_health.go).
//
// Imports: lease (Lease, Key; the Engine is a lease.PartitionRunner), its
// own sub-packages worker and metrics, service (the state machine and every
// state write), repo, internal infrastructure. Not metadatasync or
// statetopic.
package partition
