package kafkawire

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Brokers holds one shared connection to each broker of a cluster, opened
// on first use and again after it breaks or its SASL session is due.
type Brokers struct {
	d      Dialer
	lookup func(id int32) (kgo.BrokerMetadata, bool)

	mu     sync.Mutex
	conns  map[int32]*Conn
	closed bool
}

// NewBrokers returns a Brokers that dials with d and finds a broker's
// address with lookup (the cluster's metadata).
func NewBrokers(d Dialer, lookup func(id int32) (kgo.BrokerMetadata, bool)) *Brokers {
	return &Brokers{d: d, lookup: lookup, conns: map[int32]*Conn{}}
}

// Conn returns the connection to a broker, dialing it if there is none
// usable. Dialing holds up the other callers for that cluster only as
// long as the dial takes (bounded by the dial timeout).
func (b *Brokers) Conn(ctx context.Context, id int32) (*Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if c := b.conns[id]; c != nil {
		if c.Usable() {
			return c, nil
		}
		// Due for a new SASL session: the requests in flight finish on
		// it, then it closes (drain).
		go c.drain()
		delete(b.conns, id)
	}
	meta, ok := b.lookup(id)
	if !ok {
		return nil, fmt.Errorf("kafkawire: no address known for broker %d", id)
	}
	c, err := b.d.Dial(ctx, meta)
	if err != nil {
		return nil, err
	}
	b.conns[id] = c
	return c, nil
}

// Close closes every connection.
func (b *Brokers) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for id, c := range b.conns {
		c.Close()
		delete(b.conns, id)
	}
}
