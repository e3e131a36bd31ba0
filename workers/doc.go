// Package workers holds kmirror's background work, one sub-package per role.
// The roles barely touch each other; cmd/kmirror wires them into an
// instance:
//
//   - lease: the instance heartbeat and the lease manager, which keeps this
//     instance's fair share of partition and mirror metadata leases.
//   - partition: the engine and one worker per leased mirror partition
//     (alignment, mirroring, pause, stop, checkpoints). The workers' state
//     machine is partition/worker, which reaches the engine only through
//     the worker.Engine interface it declares; partition/produce (the
//     producer's gate and a session's acks) and partition/metrics are
//     leaves that both use.
//   - metadatasync: the metadata sync pass of each leased mirror.
//   - statetopic: the outbox relay to __mirror_state and the reader that
//     kmirror restore uses.
//   - workertest: the test harness shared by the packages above.
//
// Imports between them go one way: partition and metadatasync import lease
// (for Lease and Key); partition imports its own sub-packages, and
// partition/worker imports lease, produce and metrics but never partition;
// statetopic imports none of them; no other sibling imports another
// (imports_test.go checks it). Where one role needs another, it declares a small
// interface where it is used (metadatasync.PartitionAwaiter). All of them
// import service and repo, never api.
package workers
