// Package workers holds kmirror's background work, one sub-package per role;
// cmd/kmirror wires them into an instance.
//
// The data plane copies record batches whole. A batch of a leased partition
// takes this path (docs/architecture.md draws the same one):
//
//	source broker
//	→ internal/kafka/batchfetch: the mirror's fetch loop for that broker
//	→ internal/kafka/recordbatch: the batch split, its CRC and header checked
//	→ partition/worker: the partition's mirroring session (markers and
//	  aborted batches dropped, a batch a broker would refuse re-encoded)
//	→ internal/kafka/batchproduce: the instance's idempotent producer, which
//	  rewrites the header in place; its Acks check each result against the
//	  offset it was meant for
//	→ destination broker
//
// and the verified progress goes to the engine's checkpointer, which saves
// it to PostgreSQL under the partition's lease.
//
// The roles:
//
//   - lease: the lease manager, which keeps the instance's session and its
//     fair share of partition and mirror metadata leases.
//   - heartbeat: the instances' heartbeats on the destination, the clock a
//     lease rides through a database outage on.
//   - partition: the engine, which holds what the instance's workers share
//     (a fetcher per mirror, the producer, the checkpointer, the
//     desired-state cache) and runs one worker per partition lease.
//     partition/worker is that worker's state machine (alignment, the
//     mirroring session, pause, stop, failback); it reaches the engine only
//     through small ports it declares. partition/metrics is a leaf both use.
//   - metadatasync: the metadata sync pass of each leased mirror.
//   - statetopic: the outbox relay to __mirror_state and the reader that
//     kmirror restore uses.
//   - workertest: the test harness shared by the packages above.
//
// Imports between them go one way: partition and metadatasync import lease
// (for Lease and Key); partition imports its own sub-packages, and
// partition/worker imports lease and metrics but never partition; lease,
// heartbeat and statetopic import none of them (imports_test.go checks it).
// Where one role needs another, it declares a small interface where it is
// used (metadatasync.PartitionAwaiter). They use service and repo as they
// need them, never api.
package workers
