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
}

// EventsFilter selects events; an empty Mirror or Actor matches any.
type EventsFilter struct {
	// AfterID: only events with a greater id.
	AfterID int64
	Mirror  string
	Actor   string
}

// ListEvents returns a page of events after f.AfterID, oldest first.
func (s *Service) ListEvents(ctx context.Context, f EventsFilter) ([]Event, error) {
	list, err := repo.EventsList(ctx, s.pool, repo.EventsListParams{AfterID: f.AfterID, Mirror: f.Mirror, Actor: f.Actor})
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(list))
	for i, e := range list {
		out[i] = Event{ID: e.ID, At: e.At, Kind: e.Kind, Mirror: e.Mirror, Topic: e.Topic,
			Partition: e.Partition, Message: e.Message, Data: e.Data,
			Actor: e.Actor, RemoteAddr: e.RemoteAddr, RequestID: e.RequestID}
	}
	return out, nil
}

// LastEventID returns the newest event's id, 0 when there is none.
func (s *Service) LastEventID(ctx context.Context) (int64, error) {
	return repo.EventsLastID(ctx, s.pool)
}
