package kafkawire

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Brokers holds one shared connection to each broker of a cluster, opened
// on first use and again after it breaks, sits unused too long or its SASL
// session is due.
type Brokers struct {
	d      Dialer
	lookup func(id int32) (kgo.BrokerMetadata, bool)

	mu     sync.Mutex
	slots  map[int32]*brokerSlot
	closed bool
}

// brokerSlot is one broker's connection. Its own lock serializes dials
// to that broker only: a broker that does not answer holds up no other.
type brokerSlot struct {
	mu   sync.Mutex
	conn *Conn
}

// NewBrokers returns a Brokers that dials with d and finds a broker's
// address with lookup (the cluster's metadata).
func NewBrokers(d Dialer, lookup func(id int32) (kgo.BrokerMetadata, bool)) *Brokers {
	return &Brokers{d: d, lookup: lookup, slots: map[int32]*brokerSlot{}}
}

// Conn returns the connection to a broker, dialing it if there is none
// usable.
func (b *Brokers) Conn(ctx context.Context, id int32) (*Conn, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	s := b.slots[id]
	if s == nil {
		s = &brokerSlot{}
		b.slots[id] = s
	}
	b.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.conn; c != nil {
		if c.Usable() {
			return c, nil
		}
		// The requests in flight finish on it, then it closes.
		go c.drain()
		s.conn = nil
	}
	meta, ok := b.lookup(id)
	if !ok {
		return nil, fmt.Errorf("kafkawire: no address known for broker %d", id)
	}
	c, err := b.d.Dial(ctx, meta)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed { // closed while dialing
		c.Close()
		return nil, ErrClosed
	}
	s.conn = c
	return c, nil
}

// Close closes every connection.
func (b *Brokers) Close() {
	b.mu.Lock()
	b.closed = true
	slots := b.slots
	b.slots = map[int32]*brokerSlot{}
	b.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
			s.conn = nil
		}
		s.mu.Unlock()
	}
}
