// Package notifier is an instance's one LISTEN connection to Postgres,
// fanned out to the components that wait for changes. A subscriber gets a
// coalesced signal on its channel for every NOTIFY, and one more after each
// reconnect, since notifications sent while no connection listened are
// lost: the subscriber then catches up by re-reading what it watches.
// Subscribers keep a slow poll as the fallback for when the notifier is
// down.
package notifier

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"kmirror/internal/runtime/startstop"
)

// Conn is one database connection LISTENing on every channel subscribers
// may ask for.
type Conn interface {
	// Wait blocks until a notification arrives, ctx ends or the connection
	// breaks, and returns the notification's channel.
	Wait(ctx context.Context) (channel string, err error)
	Close()
}

// Config wires a Notifier.
type Config struct {
	// Listen opens a Conn (repo.Notifications): the notifier knows the
	// database only through it.
	Listen func(ctx context.Context) (Conn, error)
	// Channels are those Listen listens on (repo.Channels): a
	// subscription to another would never fire, so it is refused.
	Channels []string
	Logger   *slog.Logger
	// MaxBackoff caps the wait between reconnects; default 5s.
	MaxBackoff time.Duration
}

// Notifier holds the LISTEN connection and the subscriptions.
type Notifier struct {
	startstop.Base
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	subs map[string][]*Subscription
	// listening is closed once a connection listens, and replaced when it
	// breaks (tests and readiness wait on it).
	listening chan struct{}
	connected bool
	// onConnect, for tests, sees each new listener.
	onConnect func(Conn)
}

// New returns a Notifier; Start connects it.
func New(cfg Config) (*Notifier, error) {
	if cfg.Listen == nil {
		return nil, errors.New("notifier: Listen is required")
	}
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, 5*time.Second)
	return &Notifier{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "notifier"),
		subs: map[string][]*Subscription{}, listening: make(chan struct{})}, nil
}

// Subscription is one component's interest in a channel.
type Subscription struct {
	n       *Notifier
	channel string
	c       chan struct{}
}

// C receives a signal after notifications on the channel and after each
// reconnect. Signals coalesce: one pending signal stands for any number.
func (s *Subscription) C() <-chan struct{} {
	if s == nil {
		return nil // a nil subscription (no notifier) never fires
	}
	return s.c
}

// Unsubscribe stops the signals.
func (s *Subscription) Unsubscribe() {
	if s == nil {
		return
	}
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	s.n.subs[s.channel] = slices.DeleteFunc(s.n.subs[s.channel], func(o *Subscription) bool { return o == s })
}

func (s *Subscription) signal() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// Subscribe returns a subscription to one of Config.Channels. A nil Notifier
// returns a nil Subscription, whose C never fires, so components can run
// without one (on polling alone).
func (n *Notifier) Subscribe(channel string) *Subscription {
	if n == nil {
		return nil
	}
	if !slices.Contains(n.cfg.Channels, channel) {
		panic("notifier: no such channel " + channel)
	}
	s := &Subscription{n: n, channel: channel, c: make(chan struct{}, 1)}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subs[channel] = append(n.subs[channel], s)
	if n.connected {
		s.signal() // it may have missed changes before subscribing
	}
	return s
}

// Listening returns a channel closed while a connection listens.
func (n *Notifier) Listening() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listening
}

// Start connects in the background; it does not wait for the database.
func (n *Notifier) Start(ctx context.Context) error {
	if _, ok := n.StartInit(ctx); !ok {
		return startstop.ErrStarted
	}
	n.Go(n.run)
	return nil
}

// Stop closes the connection.
func (n *Notifier) Stop() {
	n.StopAndHalt()
}

func (n *Notifier) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("LISTEN connection lost; components poll meanwhile", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, n.cfg.MaxBackoff)
	}
}

func (n *Notifier) listenOnce(ctx context.Context) error {
	connectCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	l, err := n.cfg.Listen(connectCtx)
	cancel()
	if err != nil {
		return err
	}
	defer l.Close()
	n.setConnected(true, l)
	defer n.setConnected(false, nil)
	for {
		channel, err := l.Wait(ctx)
		if err != nil {
			return err
		}
		n.mu.Lock()
		for _, s := range n.subs[channel] {
			s.signal()
		}
		n.mu.Unlock()
	}
}

// setConnected records the connection state; on connect every subscriber
// is told to catch up.
func (n *Notifier) setConnected(up bool, l Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.connected = up
	if !up {
		n.listening = make(chan struct{})
		return
	}
	for _, subs := range n.subs {
		for _, s := range subs {
			s.signal()
		}
	}
	close(n.listening)
	if n.onConnect != nil {
		n.onConnect(l)
	}
}
