// Package worker is the per-partition state machine of the data plane: one
// Worker per leased mirror partition moves its actual state toward its
// topic's desired state in valid steps: alignment in PREPARING (align.go,
// with recreate, the source topic id check and failback's continue),
// copying in MIRRORING (mirroring_session.go), the read-only ACL, pause
// and stop.
//
// A worker depends on the engine that runs it only through Engine, the
// interface declared here (engine.go), and is given the rest in Config:
// the engine's settings, its checkpointer (Checkpoints), the produce Gate
// and the metrics. The engine (workers/partition) implements Engine, and
// holds its workers, their sessions and their acks.
//
// Imports: lease (Lease, Key), its sibling leaf packages produce and
// metrics, service (the state machine and every state write), repo,
// internal infrastructure. Never the engine's package workers/partition:
// workers/imports_test.go fails if it does.
package worker
