// Package produce is how the instance's destination producer is set up and
// what keeps its results in produce order: the client options (Options),
// the Gate that bounds the records buffered across every partition instead
// of kgo, and Acks, one mirroring session's count of its results, which
// relies on both (the k-th result is the k-th record produced).
//
// The engine (workers/partition) builds the producer with Options and owns
// the one Gate; a mirroring session (workers/partition/worker) takes room
// from the Gate and counts its results in Acks, which the engine reads for
// copies still in flight (unsettled copies, the destination watch).
//
// Imports: franz-go only; no other kmirror package.
package produce
