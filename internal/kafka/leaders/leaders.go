// Package leaders caches a Kafka cluster's partition leaders for clients
// that send raw requests to brokers: a fetch or a produce goes to the
// partition's leader, named in its topic's id from request v13 on.
package leaders

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Leader is where a partition's requests go.
type Leader struct {
	Broker int32
	// Epoch is the leader's epoch, which a fetch names so that a broker
	// that lost the leadership refuses it.
	Epoch   int32
	TopicID [16]byte
}

// minRefresh spaces metadata reads however often callers find the cache
// stale: a leader that moved makes every partition it led ask at once.
const minRefresh = 50 * time.Millisecond

// Cache holds the leaders of the topics asked for, read again when a
// caller says they moved or a topic is not known yet.
type Cache struct {
	cl *kgo.Client

	mu      sync.Mutex
	known   map[TopicPartition]Leader
	topics  map[string]bool
	isStale bool
	readAt  time.Time
}

// New returns an empty cache over cl's brokers.
func New(cl *kgo.Client) *Cache {
	return &Cache{cl: cl, known: map[TopicPartition]Leader{}, topics: map[string]bool{}}
}

// Stale makes the next Leaders call read the metadata again.
func (c *Cache) Stale() {
	c.mu.Lock()
	c.isStale = true
	c.mu.Unlock()
}

// Leaders returns the leaders of the topics' partitions (and of every topic
// asked for before), reading the metadata when a topic is new or the cache
// is stale. A partition without a leader is left out. The map is not
// changed afterwards: a later read makes a new one.
func (c *Cache) Leaders(ctx context.Context, topics map[string]bool) (map[TopicPartition]Leader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	need := c.isStale && time.Since(c.readAt) >= minRefresh
	for t := range topics {
		if !c.topics[t] {
			need = true
			c.topics[t] = true
		}
	}
	if need {
		if err := c.readLocked(ctx); err != nil {
			return nil, err
		}
	}
	return c.known, nil
}

func (c *Cache) readLocked(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	for t := range c.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	c.readAt = time.Now()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	known := map[TopicPartition]Leader{}
	stale := false
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			// A topic that does not exist (yet) has no leaders: its
			// requests wait for the next read.
			stale = true
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				stale = true
				continue
			}
			known[TopicPartition{*t.Topic, p.Partition}] = Leader{Broker: p.Leader, Epoch: p.LeaderEpoch, TopicID: t.TopicID}
		}
	}
	c.known, c.isStale = known, stale
	if len(known) == 0 && len(c.topics) > 0 {
		return fmt.Errorf("no leader for any of %d topic(s)", len(c.topics))
	}
	return nil
}
