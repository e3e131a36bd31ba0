// Package worker is the per-partition state machine of the data plane: one
// Worker per leased mirror partition moves its actual state toward its
// topic's desired state in valid steps: alignment in PREPARING (align.go,
// with recreate, the source topic id check and failback's continue),
// copying in MIRRORING (mirroring_session.go), the read-only ACL, pause
// and stop.
//
// A worker acts only through its Ports (ports.go): small interfaces, each
// named for what it does (desired states, slots, the partition's and the
// topic's rows, the offset map, the source, the destination, the copy, the
// destination watch, checkpoints), each implemented by the part of the
// instance that owns that work. It holds no pool, makes no repo query and
// holds no Kafka client, so its decisions are tested with in-memory fakes
// of the ports. It is given the rest in Config: the engine's settings, the
// produce Gate and the metrics.
//
// Imports: lease (Lease, Key), its sibling leaf package metrics, service
// (the state machine's vocabulary), repo (row types), internal/kafka (batch
// and offset types). Never the engine's package workers/partition:
// workers/imports_test.go fails if it does.
package worker
