package batchproduce

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leader is where a partition's batches go: its leader broker, and its
// topic's id (produce requests from v13 name topics by id).
type leader struct {
	broker  int32
	topicID [16]byte
}

// metadata caches the destination's partition leaders, read again when a
// produce says they moved or a topic is not known yet.
type metadata struct {
	cl *kgo.Client

	mu      sync.Mutex
	known   map[topicPartition]leader
	topics  map[string]bool
	isStale bool
}

func (m *metadata) init(cl *kgo.Client) {
	m.cl = cl
	m.known = map[topicPartition]leader{}
	m.topics = map[string]bool{}
}

// stale makes the next leaders call read the metadata again.
func (m *metadata) stale() {
	m.mu.Lock()
	m.isStale = true
	m.mu.Unlock()
}

// leaders returns the leaders of the topics' partitions, reading the
// metadata when a topic is new or the cache is stale. A partition without
// a leader is left out.
func (m *metadata) leaders(ctx context.Context, topics map[string]bool) (map[topicPartition]leader, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	need := m.isStale
	for t := range topics {
		if !m.topics[t] {
			need = true
			m.topics[t] = true
		}
	}
	if need {
		if err := m.refreshLocked(ctx); err != nil {
			return nil, err
		}
	}
	return m.known, nil
}

func (m *metadata) refreshLocked(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	for t := range m.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return err
	}
	known := map[topicPartition]leader{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			// A topic that does not exist (yet) has no leaders: its
			// batches wait for it, and its next metadata read.
			m.isStale = true
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				m.isStale = true
				continue
			}
			known[topicPartition{*t.Topic, p.Partition}] = leader{broker: p.Leader, topicID: t.TopicID}
		}
	}
	if len(known) == 0 && len(m.topics) > 0 {
		m.known = known
		return fmt.Errorf("no leader for any of %d topic(s)", len(m.topics))
	}
	m.known = known
	m.isStale = false
	return nil
}
