package service

import (
	"context"

	"kmirror/repo"
)

// Event is an audit-log entry: an operator action or a state change. Its
// Actor made the change, from RemoteAddr, in API request RequestID; those
// are empty for the workers' own events.
type Event = repo.Event

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
	return repo.EventsList(ctx, s.pool, repo.EventsListParams{AfterID: f.AfterID, Mirror: f.Mirror,
		Incarnation: f.Incarnation, AllIncarnations: f.AllIncarnations, Actor: f.Actor})
}

// LastEventID returns the newest event's id, 0 when there is none.
func (s *Control) LastEventID(ctx context.Context) (int64, error) {
	return repo.EventsLastID(ctx, s.pool)
}
