package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/repo"
)

// FieldError names one rejected input field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
} // @name FieldError

// ValidationError is bad input: nothing was changed.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// validation collects field errors; err returns nil when there are none.
type validation struct{ fields []FieldError }

func (v *validation) addf(field, format string, args ...any) {
	v.fields = append(v.fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validation) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}

// NotFoundError is an unknown mirror, topic or partition, or a pattern that
// matched nothing.
type NotFoundError struct {
	// Kind is "mirror", "topic", "partition", "offset" or "match".
	Kind   string
	Detail string
}

func (e *NotFoundError) Error() string { return e.Detail }

// ConflictError is an action that does not apply to the current state, or a
// name that is taken. Topics lists the offending topics, when any.
type ConflictError struct {
	Detail string
	Topics []TopicState
}

func (e *ConflictError) Error() string { return e.Detail }

// TopicState names a topic whose state refused an action, for conflict
// reports: its desired state on this mirror, or the other mirror that
// mirrors it.
type TopicState struct {
	Topic string
	// DesiredState is the topic's desired state on this mirror; empty when
	// MirroredBy is set.
	DesiredState DesiredState
	// MirroredBy names another mirror that mirrors the topic.
	MirroredBy string
	// DestinationTopic, with MirroredBy, is the destination topic that
	// other mirror writes.
	DestinationTopic string
}

// String says what the topic's state is, as in "orders is paused".
func (t TopicState) String() string {
	if t.MirroredBy != "" {
		return t.Topic + " is mirrored by " + t.MirroredBy
	}
	return t.Topic + " is " + string(t.DesiredState)
}

// ErrDatabaseUnavailable wraps every error of reaching Postgres (no
// connection, a broken one, no answer in time): the request may succeed if
// tried again later.
var ErrDatabaseUnavailable = repo.ErrUnavailable

// DatabaseWritable checks, for readiness, that pool reaches a database that
// takes writes: it answers, and not as a read-only standby (an
// ErrDatabaseUnavailable otherwise).
func DatabaseWritable(ctx context.Context, pool *pgxpool.Pool) error {
	return repo.PingWritable(ctx, pool)
}

// ErrInvalidText is input the database cannot store as text (a NUL byte,
// invalid UTF-8) that reached it anyway: bad input, nothing changed.
var ErrInvalidText = repo.ErrInvalidText

// UnavailableError is a dependency (a source cluster) that could not be
// reached. Nothing was changed.
type UnavailableError struct {
	Dependency string
	Detail     string
}

func (e *UnavailableError) Error() string { return e.Detail }
