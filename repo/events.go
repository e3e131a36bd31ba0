package repo

import (
	"context"
	"encoding/json"
	"time"
)

// Event is one audit-log row: an operator action or a state change.
type Event struct {
	ID     int64
	At     time.Time
	Kind   string
	Mirror string
	Topic  string
	// DestinationTopic is the destination topic of Topic, as its row named
	// it when the event was recorded (a trigger reads it); Topic's name for
	// an event recorded before events kept it; "" without a topic.
	DestinationTopic string
	Partition        *int32
	Message          string
	Data             json.RawMessage
	// Actor, RemoteAddr and RequestID say who asked for the change, from
	// where, in which API request; empty for the workers' own events.
	Actor      string
	RemoteAddr string
	RequestID  string
	// Incarnation is the incarnation of the mirror the event is about; 0
	// when it has none. Left 0 on insert, it is the mirror's current one
	// (a trigger reads it).
	Incarnation int64
}

// EventsInsert appends an event; call it in the transaction of the change it
// records.
func EventsInsert(ctx context.Context, q DBTX, e Event) error {
	var data any
	if len(e.Data) > 0 {
		data = e.Data
	}
	_, err := q.Exec(ctx, `INSERT INTO events (kind, mirror, topic, partition, message, data,
			actor, remote_addr, request_id, mirror_incarnation)
		VALUES ($1, nullif($2, ''), nullif($3, ''), $4, $5, $6, nullif($7, ''), nullif($8, ''), nullif($9, ''),
			nullif($10::bigint, 0))`,
		e.Kind, e.Mirror, e.Topic, e.Partition, e.Message, data, e.Actor, e.RemoteAddr, e.RequestID, e.Incarnation)
	return interpret(err)
}

// EventsListParams selects events after an id, oldest first; an empty
// Mirror or Actor matches any.
type EventsListParams struct {
	AfterID int64
	// Mirror selects the events of one incarnation of the mirror of that
	// name: Incarnation, or when 0 the current one (the mirror's, or after
	// its delete the deleted one's), so that an earlier mirror of the same
	// name is not replayed as this one's. AllIncarnations selects them all.
	Mirror          string
	Incarnation     int64
	AllIncarnations bool
	Actor           string
	// Through, when positive, leaves out events with a greater id: a
	// reader that follows the table sets it from an EventsHorizon, so
	// that it never moves past an id that may still commit.
	Through int64
	Limit   int
}

// EventsList returns events with id > AfterID.
func EventsList(ctx context.Context, q DBTX, p EventsListParams) ([]Event, error) {
	if p.Limit <= 0 {
		p.Limit = 500
	}
	// The current incarnation is computed once per statement (an InitPlan);
	// the latest event of the name stands for a mirror already deleted.
	rows, err := q.Query(ctx, `SELECT id, at, kind, coalesce(mirror, ''), coalesce(topic, ''),
			coalesce(destination_topic, topic, ''), partition, message, data, coalesce(actor, ''),
			coalesce(remote_addr, ''), coalesce(request_id, ''), coalesce(mirror_incarnation, 0)
		FROM events WHERE id > $1 AND ($7::bigint <= 0 OR id <= $7) AND ($2 = '' OR mirror = $2) AND ($4 = '' OR actor = $4)
		  AND ($2 = '' OR $6::bool OR mirror_incarnation IS NOT DISTINCT FROM CASE WHEN $5::bigint > 0 THEN $5::bigint ELSE coalesce(
				(SELECT incarnation FROM mirrors WHERE name = $2),
				(SELECT mirror_incarnation FROM events WHERE mirror = $2 ORDER BY id DESC LIMIT 1)) END)
		ORDER BY id LIMIT $3`, p.AfterID, p.Mirror, p.Limit, p.Actor, p.Incarnation, p.AllIncarnations, p.Through)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.At, &e.Kind, &e.Mirror, &e.Topic, &e.DestinationTopic, &e.Partition,
			&e.Message, &e.Data, &e.Actor, &e.RemoteAddr, &e.RequestID, &e.Incarnation); err != nil {
			return nil, interpret(err)
		}
		out = append(out, e)
	}
	return out, interpret(rows.Err())
}

// EventsLastID returns the newest event id, 0 when there is none.
func EventsLastID(ctx context.Context, q DBTX) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&id)
	return id, interpret(err)
}
