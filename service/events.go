package service

import (
	"context"
	"encoding/json"
	"time"

	"kmirror/repo"
)

// Event is an audit-log entry: an operator action or a state change.
type Event struct {
	ID        int64
	At        time.Time
	Kind      string
	Mirror    string
	Topic     string
	Partition *int32
	Message   string
	// Data is the kind's details as JSON, empty when it has none.
	Data json.RawMessage
	// Actor made the change, from RemoteAddr, in API request RequestID;
	// empty for the workers' own events.
	Actor      string
	RemoteAddr string
	RequestID  string
	// Incarnation is the incarnation of the mirror it is about (see
	// Mirror.Incarnation); 0 when it has no mirror, or was recorded before
	// incarnations were.
	Incarnation int64
}

// EventsFilter selects events; an empty Mirror or Actor matches any.
type EventsFilter struct {
	// AfterID: only events with a greater id.
	AfterID int64
	// Mirror selects the events of the current mirror of that name (after
	// its delete, of the deleted one), not those of an earlier, deleted
	// mirror of the same name; Incarnation selects one incarnation's
	// instead, and AllIncarnations every one's. Both need Mirror.
	Mirror          string
	Incarnation     int64
	AllIncarnations bool
	Actor           string
}

// ListEvents returns a page of events after f.AfterID, oldest first.
func (s *Control) ListEvents(ctx context.Context, f EventsFilter) ([]Event, error) {
	if (f.Incarnation != 0 || f.AllIncarnations) && f.Mirror == "" {
		return nil, &ValidationError{Fields: []FieldError{{Field: "incarnation", Message: "needs a mirror"}}}
	}
	if f.Incarnation < 0 {
		return nil, &ValidationError{Fields: []FieldError{{Field: "incarnation", Message: "must be a positive integer or all"}}}
	}
	list, err := repo.EventsList(ctx, s.pool, repo.EventsListParams{AfterID: f.AfterID, Mirror: f.Mirror,
		Incarnation: f.Incarnation, AllIncarnations: f.AllIncarnations, Actor: f.Actor})
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(list))
	for i, e := range list {
		out[i] = Event{ID: e.ID, At: e.At, Kind: e.Kind, Mirror: e.Mirror, Topic: e.Topic,
			Partition: e.Partition, Message: e.Message, Data: e.Data,
			Actor: e.Actor, RemoteAddr: e.RemoteAddr, RequestID: e.RequestID, Incarnation: e.Incarnation}
	}
	return out, nil
}

// LastEventID returns the newest event's id, 0 when there is none.
func (s *Control) LastEventID(ctx context.Context) (int64, error) {
	return repo.EventsLastID(ctx, s.pool)
}
