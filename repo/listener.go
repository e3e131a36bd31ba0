package repo

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/internal/runtime/notifier"
)

// Channels that the migrations' triggers NOTIFY.
const (
	// ChannelDesired: mirror topics were added or removed, or their
	// desired state or recreate flag changed.
	ChannelDesired = "kmirror_desired"
	// ChannelLeaseDemand: mirror partitions were added or removed, or one
	// reached STOPPED and no longer needs a worker.
	ChannelLeaseDemand = "kmirror_lease_demand"
	// ChannelSync: a mirror's "sync now" was requested.
	ChannelSync = "kmirror_sync"
	// ChannelOutbox: outbox rows were inserted.
	ChannelOutbox = "kmirror_outbox"
)

// Channels are every channel above: what an instance's notifier listens on.
var Channels = []string{ChannelDesired, ChannelLeaseDemand, ChannelSync, ChannelOutbox}

// Notifications opens, for an instance's notifier, a Listener on Channels
// with a connection of pool.
func Notifications(pool *pgxpool.Pool) func(context.Context) (notifier.Conn, error) {
	return func(ctx context.Context) (notifier.Conn, error) {
		l, err := ListenerOpen(ctx, pool, Channels...)
		if err != nil {
			return nil, err // not a nil *Listener in a Conn
		}
		return l, nil
	}
}

// Listener is one connection, taken out of the pool, that LISTENs.
type Listener struct {
	conn *pgx.Conn
}

// ListenerOpen takes a connection out of the pool for good (a LISTENing
// session must not be handed to other users) and LISTENs on the channels.
func ListenerOpen(ctx context.Context, pool *pgxpool.Pool, channels ...string) (*Listener, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.Hijack()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			closeConn(conn)
			return nil, err
		}
	}
	return &Listener{conn: conn}, nil
}

// Wait blocks until a notification arrives, ctx ends or the connection
// breaks, and returns its channel (the payloads carry nothing kmirror
// reads).
func (l *Listener) Wait(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", err
	}
	return n.Channel, nil
}

// Close closes the connection.
func (l *Listener) Close() { closeConn(l.conn) }

// BackendPID is the listening session's server process id (tests end it
// with pg_terminate_backend to simulate a broken connection).
func (l *Listener) BackendPID() uint32 { return l.conn.PgConn().PID() }

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
