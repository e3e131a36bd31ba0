package repo

import (
	"context"
	"encoding/json"
	"time"
)

// Event is one audit-log row: an operator action or a state change.
type Event struct {
	ID        int64
	At        time.Time
	Kind      string
	Mirror    string
	Topic     string
	Partition *int32
	Message   string
	Data      json.RawMessage
	// Actor, RemoteAddr and RequestID say who asked for the change, from
	// where, in which API request; empty for the workers' own events.
	Actor      string
	RemoteAddr string
	RequestID  string
}

// EventsInsert appends an event; call it in the transaction of the change it
// records.
func EventsInsert(ctx context.Context, q DBTX, e Event) error {
	var data any
	if len(e.Data) > 0 {
		data = e.Data
	}
	_, err := q.Exec(ctx, `INSERT INTO events (kind, mirror, topic, partition, message, data,
			actor, remote_addr, request_id)
		VALUES ($1, nullif($2, ''), nullif($3, ''), $4, $5, $6, nullif($7, ''), nullif($8, ''), nullif($9, ''))`,
		e.Kind, e.Mirror, e.Topic, e.Partition, e.Message, data, e.Actor, e.RemoteAddr, e.RequestID)
	return interpret(err)
}

// EventsListParams selects events after an id, oldest first; an empty
// Mirror or Actor matches any.
type EventsListParams struct {
	AfterID int64
	Mirror  string
	Actor   string
	Limit   int
}

// EventsList returns events with id > AfterID.
func EventsList(ctx context.Context, q DBTX, p EventsListParams) ([]Event, error) {
	if p.Limit <= 0 {
		p.Limit = 500
	}
	rows, err := q.Query(ctx, `SELECT id, at, kind, coalesce(mirror, ''), coalesce(topic, ''),
			partition, message, data, coalesce(actor, ''), coalesce(remote_addr, ''), coalesce(request_id, '')
		FROM events WHERE id > $1 AND ($2 = '' OR mirror = $2) AND ($4 = '' OR actor = $4)
		ORDER BY id LIMIT $3`, p.AfterID, p.Mirror, p.Limit, p.Actor)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.At, &e.Kind, &e.Mirror, &e.Topic, &e.Partition,
			&e.Message, &e.Data, &e.Actor, &e.RemoteAddr, &e.RequestID); err != nil {
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
