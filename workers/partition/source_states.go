package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/service"
)

// A failback (the worker's continue.go) proves the history a destination
// holds from the source cluster's own __mirror_state, which the engine
// reads and shares.

// sourceStateFresh is how long a source's __mirror_state, once read, serves
// the partitions that prepare after it: a topic's partitions continue
// together, and each read is the whole topic.
const sourceStateFresh = 5 * time.Second

// sourceStates caches each mirror's read of its source's __mirror_state.
type sourceStates struct {
	// read reads a cluster's __mirror_state (EngineConfig.SourceState).
	read  func(ctx context.Context, conn kafkaconn.Config) (map[string][]byte, error)
	mu    sync.Mutex // held while reading: the others wait and share
	reads map[string]sourceStateRead
}

type sourceStateRead struct {
	at   time.Time
	snap service.StateSnapshot
}

// sourceState returns the decoded __mirror_state of a mirror's source
// cluster.
func (s *sourceStates) get(ctx context.Context, mirror string, conn kafkaconn.Config) (service.StateSnapshot, error) {
	if s.read == nil {
		return service.StateSnapshot{}, fmt.Errorf("this instance cannot read a source's %s", service.StateTopic)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.reads[mirror]; ok && time.Since(r.at) < sourceStateFresh {
		return r.snap, nil
	}
	latest, err := s.read(ctx, conn)
	if errors.Is(err, service.ErrStateTopicMissing) {
		latest, err = nil, nil // a source no kmirror wrote to: nothing to prove by
	}
	if err != nil {
		return service.StateSnapshot{}, err
	}
	snap, err := service.DecodeState(latest)
	if err != nil {
		return service.StateSnapshot{}, err
	}
	if s.reads == nil {
		s.reads = map[string]sourceStateRead{}
	}
	s.reads[mirror] = sourceStateRead{at: time.Now(), snap: snap}
	return snap, nil
}
