package partition

import (
	"kmirror/workers/partition/worker"
)

// A worker acts only through the ports it is given (worker.Ports), each
// implemented by the component whose work it is: the desired-state cache
// (desired_states.go), the slots (prepare_slots.go), the grouped
// partition-row statements (grouped_statements.go), the topic rows
// (topic_row_writes.go), the service's offset map, each mirror's source
// clients (source_clients.go), the destination's (destination_topics.go),
// the copier (copier.go), the destination watch (destination_watch.go,
// unsettled.go) and the checkpointer. The engine never reaches into a
// worker or its session: the watch tells a session to end on the channel
// it gave it, and pokes a worker on the channel it registered.

// portsFor returns the ports of a new worker, which takes its pokes from
// pokes.
func (e *Engine) portsFor(pokes <-chan struct{}) worker.Ports {
	return worker.Ports{
		Desires:     e.desired,
		Prepare:     e.prep,
		TakeOver:    e.takeovers,
		Rows:        e.rows,
		Topics:      e.topics,
		OffsetMap:   e.cfg.Service,
		Sources:     sourceLookup(e.source),
		Destination: e.destinations,
		Copy:        e.copier,
		Watch:       e.watch,
		Checkpoints: e.cp,
		Pokes:       pokes,
	}
}
