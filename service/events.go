package service

import (
	"context"
	"time"

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

// EventFeed follows the events table in id order and never skips one: it
// reads only up to the ids that can no longer commit (repo.EventsHorizon),
// so an event whose transaction took a lower id and committed later than
// a neighbour's is still sent, in its place. One follower keeps one feed.
type EventFeed struct {
	s       *Control
	filter  EventsFilter
	horizon repo.EventsHorizon
}

// feedPage is the most events one Next returns.
const feedPage = 500

// FollowEvents returns a feed of the events f selects after f.AfterID.
func (s *Control) FollowEvents(f EventsFilter) (*EventFeed, error) {
	if (f.Incarnation != 0 || f.AllIncarnations) && f.Mirror == "" {
		return nil, &ValidationError{Fields: []FieldError{{Field: "incarnation", Message: "needs a mirror"}}}
	}
	return &EventFeed{s: s, filter: f}, nil
}

// Next returns the events after the last one it returned, oldest first;
// none when nothing new is final yet.
func (f *EventFeed) Next(ctx context.Context) ([]Event, error) {
	through, err := f.horizon.Advance(ctx, f.s.pool)
	if err != nil || through <= f.filter.AfterID {
		return nil, err
	}
	events, err := repo.EventsList(ctx, f.s.pool, repo.EventsListParams{AfterID: f.filter.AfterID, Through: through,
		Mirror: f.filter.Mirror, Incarnation: f.filter.Incarnation, AllIncarnations: f.filter.AllIncarnations,
		Actor: f.filter.Actor, Limit: feedPage})
	switch n := len(events); {
	case err != nil:
		return nil, err
	case n == feedPage:
		f.filter.AfterID = events[n-1].ID
	default:
		// Every id up to through was read: the next read starts there,
		// not at the last one this filter kept.
		f.filter.AfterID = through
	}
	return events, nil
}

// Behind is how long newer events have waited for an older transaction
// to end (repo.EventsHorizon.Behind); 0 when none waits.
func (f *EventFeed) Behind() time.Duration { return f.horizon.Behind() }

// LastEventID returns the newest event's id, 0 when there is none.
func (s *Control) LastEventID(ctx context.Context) (int64, error) {
	return repo.EventsLastID(ctx, s.pool)
}
