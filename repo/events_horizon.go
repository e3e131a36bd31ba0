package repo

import (
	"context"
	"time"
)

// EventsHorizon says up to which id the events table is final: no event
// with an id at or below it can still appear. Ids come from a sequence when
// the row is inserted, not when its transaction commits, so a reader that
// moved past every id it saw would skip an event whose transaction took a
// lower id and committed later (an operator's pause, say, racing the
// workers' batched state changes).
//
// Each Advance reads the sequence (every id up to it has been taken) and
// then a snapshot: each transaction that took one of those ids had its own
// transaction id by then (migration 000021), so it is below the snapshot's
// xmax. Once the oldest transaction still running is past that xmax, every
// one of them has committed or rolled back, and the ids up to the sequence
// value read are final. Under steady writes that is the next poll; a
// transaction left open holds the horizon back until it ends, in any
// database of the server, since transaction ids are the server's: Behind
// tells how long.
//
// The zero value is ready; it holds marks between calls, so one reader
// keeps one.
type EventsHorizon struct {
	final   int64
	pending []horizonMark
}

// horizonMark: ids up to last are final once no transaction below xmax runs.
type horizonMark struct {
	last, xmax int64
	at         time.Time
}

// maxPendingMarks bounds the marks kept while a long transaction holds the
// horizon back; the second oldest goes (the oldest tells Behind), which
// only delays the horizon.
const maxPendingMarks = 64

// Advance returns the id up to which events are final. It never moves back.
func (h *EventsHorizon) Advance(ctx context.Context, q DBTX) (int64, error) {
	var last int64
	if err := q.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value('events_id_seq'), 0)`).Scan(&last); err != nil {
		return h.final, interpret(err)
	}
	// A later statement: its snapshot is taken after the sequence was read.
	var xmin, xmax int64
	if err := q.QueryRow(ctx, `SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
		FROM pg_current_snapshot() s`).Scan(&xmin, &xmax); err != nil {
		return h.final, interpret(err)
	}
	h.pending = append(h.pending, horizonMark{last: last, xmax: xmax, at: time.Now()})
	kept := h.pending[:0]
	for _, m := range h.pending {
		switch {
		case m.xmax > xmax:
			// Taken on another server (a failover: the new primary may
			// number transactions from lower down); dropping a mark only
			// delays the horizon.
		case m.xmax <= xmin:
			h.final = max(h.final, m.last)
		default:
			kept = append(kept, m)
		}
	}
	if len(kept) > maxPendingMarks {
		kept = append(kept[:1], kept[2:]...)
	}
	h.pending = kept
	return h.final, nil
}

// Behind is how long the horizon has been held back: the age of the
// oldest read whose ids are not final yet, 0 when none waits.
func (h *EventsHorizon) Behind() time.Duration {
	for _, m := range h.pending {
		if m.last > h.final {
			return time.Since(m.at)
		}
	}
	return 0
}
