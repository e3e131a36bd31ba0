// Package produce is what keeps the instance's destination producer's
// results in produce order and its buffer bounded: the Gate that bounds the
// records queued across every partition, and Acks, one mirroring session's
// count of its results (the results come in the order the batches were
// produced).
//
// The engine (workers/partition) owns the one Gate; a mirroring session
// (workers/partition/worker) takes room from the Gate and counts its
// results in Acks, which the engine reads for copies still in flight
// (unsettled copies, the destination watch).
//
// Imports: no other kmirror package.
package produce
