// Package kafka is the room of kmirror's Kafka stack, one sub-package per
// piece, each over franz-go's clients and broker connections:
//
//   - kafkaconn: client options from Kafka-style security settings, the
//     request-version cap, and the admin reads the others share (offsets,
//     partitions, tails, a topic's configs, the read-only ACLs).
//   - batchfetch: raw read_committed fetches that hand each partition its
//     record batches as the broker sent them.
//   - recordbatch: those batches as bytes: split, checked, decompressed
//     within a bound, and rewritten for the producer.
//   - batchproduce: one idempotent producer of whole batches, with the Gate
//     and Acks that keep its results in order and its buffer bounded.
//   - leaders: the partition-leader cache batchfetch and batchproduce share.
//   - preflight: the checks of a mirror's clusters with kmirror's own
//     credentials.
//   - schemaregistry: copying a mirror's Schema Registry subjects with
//     their ids kept (not wired into mirrors yet).
//
// A record copied takes them in that order: batchfetch reads it in a batch,
// recordbatch checks the batch and, when it must, rewrites it, and
// batchproduce writes it to the destination. None of them knows the
// domain's tables; the data plane (workers/partition) wires them together.
package kafka
