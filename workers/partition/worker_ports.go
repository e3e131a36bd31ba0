package partition

import (
	"kmirror/workers/partition/worker"
)

// A worker acts only through the ports it is given (worker.Ports), each
// implemented where its work is done: the desired-state cache, the slots,
// the grouped partition-row statements (grouped_statements.go), the topic
// rows (topic_row_writes.go), the service's offset map, each mirror's
// source clients (source_clients.go) and the checkpointer. What the engine
// does for the workers with its destination clients is one port each, a
// view of the engine whose methods are the work itself, in the file of its
// concern: the destination topics (destination_topics.go), the copy
// (batch_clients.go) and the destination watch (destination_watch.go,
// unsettled.go). The engine never reaches into a worker or its session:
// it tells a session through the channel the watch gave it, and a worker
// through its pokes channel.
type (
	destinationPort Engine
	copyPort        Engine
)

// portsFor returns the ports of a new worker, which takes its pokes from
// pokes.
func (e *Engine) portsFor(pokes <-chan struct{}) worker.Ports {
	return worker.Ports{
		Desires:     e.desired,
		Prepare:     e.prep,
		TakeOver:    e.takeovers,
		Rows:        e.rows,
		Topics:      &topicRows{Workers: e.cfg.Service, pool: e.cfg.Pool, shared: &e.shared},
		OffsetMap:   e.cfg.Service,
		Sources:     sourceLookup(e.source),
		Destination: (*destinationPort)(e),
		Copy:        (*copyPort)(e),
		Watch:       e.watch,
		Checkpoints: e.cp,
		Pokes:       pokes,
	}
}
