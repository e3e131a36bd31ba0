package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"kmirror/repo"
)

func topicFence(partition int32) repo.LeaseFence {
	return repo.LeaseFence{Mirror: "m", Topic: "t", Partition: partition, Owner: "i", Epoch: 1}
}

// The partitions of a topic that make the same write of its row while one
// runs share that write: one statement, not one each queued on the row.
func TestWriteTopicRowShared(t *testing.T) {
	e := newSharedReads()
	var writes atomic.Int64
	release := make(chan struct{})
	write := func(_ context.Context, f repo.LeaseFence) ([]byte, error) {
		writes.Add(1)
		<-release
		return []byte{byte(f.Partition)}, nil
	}
	first := startFirst(t, "write", &writes, func() (int64, error) {
		v, err := e.writeTopicRow(t.Context(), topicFence(0), "x", write)
		return int64(len(v)), err
	})
	const n = 11
	waiting := &doneSpy{Context: t.Context()}
	got, errs := make([][]byte, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = e.writeTopicRow(waiting, topicFence(int32(i+1)), "x", write) })
	}
	waitFor(t, "every other partition waiting", func() (bool, string) {
		return waiting.waits.Load() == n, fmt.Sprint(waiting.waits.Load(), " waiting")
	})
	close(release)
	wg.Wait()
	<-first
	if w := writes.Load(); w != 1 {
		t.Errorf("%d writes, want 1", w)
	}
	for i := range n {
		if errs[i] != nil || !bytes.Equal(got[i], []byte{0}) {
			t.Errorf("partition %d got %v, %v; want the shared write's row [0]", i+1, got[i], errs[i])
		}
	}
}

// When the partition whose write the others joined has lost its lease (the
// fenced write finds nothing), a partition that joined writes under its own
// fence instead of taking that as its own lost lease.
func TestWriteTopicRowFallsBackToOwnFence(t *testing.T) {
	e := newSharedReads()
	var mu sync.Mutex
	var by []int32
	var started atomic.Int64
	release := make(chan struct{})
	write := func(_ context.Context, f repo.LeaseFence) ([]byte, error) {
		mu.Lock()
		by = append(by, f.Partition)
		mu.Unlock()
		if f.Partition == 0 {
			started.Add(1)
			<-release
			return nil, repo.ErrNotFound // partition 0's lease moved on
		}
		return []byte("id"), nil
	}
	firstErr := make(chan error, 1)
	go func() {
		_, err := e.writeTopicRow(t.Context(), topicFence(0), "x", write)
		firstErr <- err
	}()
	waitFor(t, "partition 0's write running", func() (bool, string) {
		return started.Load() == 1, "not started"
	})
	waiting := &doneSpy{Context: t.Context()}
	joined := make(chan error, 1)
	var stored []byte
	go func() {
		var err error
		stored, err = e.writeTopicRow(waiting, topicFence(1), "x", write)
		joined <- err
	}()
	waitFor(t, "partition 1 waiting on it", func() (bool, string) {
		return waiting.waits.Load() == 1, "not waiting"
	})
	close(release)
	if err := <-firstErr; !errors.Is(err, repo.ErrNotFound) {
		t.Errorf("partition 0 got %v, want ErrNotFound", err)
	}
	if err := <-joined; err != nil || string(stored) != "id" {
		t.Errorf("partition 1 got %q, %v; want its own write's row", stored, err)
	}
	if len(by) != 2 || by[0] != 0 || by[1] != 1 {
		t.Errorf("writes under the fences of partitions %v, want [0 1]", by)
	}
}
