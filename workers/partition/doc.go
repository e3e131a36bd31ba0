// Package partition is the data plane's engine: the Engine runs one
// worker per leased mirror partition and owns what the instance's workers
// share, each part a component with its own file:
//   - the Kafka clients: the mirrors' raw fetchers and the one idempotent
//     destination producer (batch_clients.go, client_health.go), each
//     mirror's source clients (source_clients.go), the destination's
//     (destination_topics.go: topics made, recreated and made read-only),
//     and the copy as the workers use it (copier.go);
//   - the checkpointer (checkpointer.go) and the desired-state cache
//     (desired_states.go);
//   - state changes and row reads made in groups (grouped_statements.go
//     over groups.go), the reads and topic-row writes shared by partitions
//     preparing together (shared_reads.go, topic_row_writes.go,
//     coalesce.go), alignment's record reads per cluster
//     (record_reads.go), and the prepare and takeover slots;
//   - the destination watch and ended sessions' copies
//     (destination_watch.go, unsettled.go), and end offsets for lag
//     (offsets_refresh.go, foreign_ends.go).
//
// Its sub-packages:
//   - worker: the per-partition state machine (alignment, mirroring,
//     pause, stop), which acts only through the small ports it declares
//     (worker.Ports); worker_ports.go says which component implements
//     each. The engine never reaches into a worker or its
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
