package partition

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
)

// recordReads reads records back for alignment (a walk of the records a
// crashed owner wrote past its checkpoint, on both clusters) in groups:
// the reads of one cluster asked while a group runs go together in the
// next, on one client that fetches all their partitions. After a crash a
// survivor walks the partitions with unsaved copies all at once; one
// client each would dial, load metadata and fetch once per partition and
// cluster.
//
// Each read returns what kafkaconn.ReadRecords would: up to n records of
// its partition from offset from on, below end, read_committed on a
// source; a read stops early, with what it has, once a poll of the whole
// group brings nothing (a range below end that holds only aborted or
// control records).
type recordReads struct {
	mu     sync.Mutex
	queues map[string]*readQueue // by cluster: "src/" + mirror, or "dst"
}

// readQueue is one cluster's pending reads and whether a group runs.
type readQueue struct {
	pending []*recordRead
	running bool
}

// recordRead is one partition's read, answered once its group ran.
type recordRead struct {
	conn      kafkaconn.Config
	committed bool
	extra     []kgo.Opt
	topic     string
	partition int32
	from, end int64
	n         int

	done  chan struct{}
	recs  []*kgo.Record
	err   error
	ended bool // no more records wanted (set while its group runs)
}

const (
	// readGroupTimeout bounds one group's reads; a caller leaves earlier
	// when its context ends (its read still runs with the group).
	readGroupTimeout = 60 * time.Second
	// readGroupMax bounds the partitions one group's client fetches.
	readGroupMax = 4096
	// readQuietPoll is how long a group waits on a poll that brings
	// nothing before it answers what is left with what it has.
	readQuietPoll = 2 * time.Second
)

func newRecordReads() *recordReads { return &recordReads{queues: map[string]*readQueue{}} }

// read reads up to n records of topic/partition on conn from offset from,
// below end, with the other reads of cluster (the queue's key) asked
// meanwhile.
func (rr *recordReads) read(ctx context.Context, cluster string, conn kafkaconn.Config, committed bool, extra []kgo.Opt,
	topic string, partition int32, from, end int64, n int) ([]*kgo.Record, error) {
	if n <= 0 || from >= end {
		return nil, nil
	}
	r := &recordRead{conn: conn, committed: committed, extra: extra, topic: topic, partition: partition,
		from: from, end: end, n: n, done: make(chan struct{})}
	rr.mu.Lock()
	q := rr.queues[cluster]
	if q == nil {
		q = &readQueue{}
		rr.queues[cluster] = q
	}
	q.pending = append(q.pending, r)
	if !q.running {
		q.running = true
		go rr.loop(q)
	}
	rr.mu.Unlock()
	select {
	case <-r.done:
		return r.recs, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading %s/%d from %d: %w", topic, partition, from, context.Cause(ctx))
	}
}

// loop runs the queue's groups until nothing is pending. A group takes
// the pending reads on the first one's connection, one per partition; the
// others wait for the next.
func (rr *recordReads) loop(q *readQueue) {
	time.Sleep(groupLinger) // the rest of the burst
	for {
		rr.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			rr.mu.Unlock()
			return
		}
		first := q.pending[0]
		var group, rest []*recordRead
		seen := map[topicPartition]bool{}
		for _, r := range q.pending {
			tp := topicPartition{r.topic, r.partition}
			if len(group) < readGroupMax && !seen[tp] && r.committed == first.committed && reflect.DeepEqual(r.conn, first.conn) {
				seen[tp] = true
				group = append(group, r)
			} else {
				rest = append(rest, r)
			}
		}
		q.pending = rest
		rr.mu.Unlock()
		readGroup(group)
		for _, r := range group {
			close(r.done)
		}
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// readGroup reads every read of the group on one client. The group shares
// a connection, read isolation and extra options (the first read's).
func readGroup(group []*recordRead) {
	first := group[0]
	byTP := make(map[topicPartition]*recordRead, len(group))
	parts := map[string]map[int32]kgo.Offset{}
	for _, r := range group {
		byTP[topicPartition{r.topic, r.partition}] = r
		if parts[r.topic] == nil {
			parts[r.topic] = map[int32]kgo.Offset{}
		}
		parts[r.topic][r.partition] = kgo.NewOffset().At(r.from)
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(parts),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, first.extra...)
	if first.committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	fail := func(err error) {
		for _, r := range group {
			if !r.ended {
				r.recs, r.err, r.ended = nil, fmt.Errorf("reading %s/%d from %d: %w", r.topic, r.partition, r.from, err), true
			}
		}
	}
	cl, err := first.conn.NewClient(opts...)
	if err != nil {
		fail(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readGroupTimeout)
	defer cancel()
	open := len(group)
	end := func(r *recordRead) {
		if !r.ended {
			r.ended = true
			open--
			cl.RemoveConsumePartitions(map[string][]int32{r.topic: {r.partition}})
		}
	}
	for open > 0 {
		pollCtx, cancelPoll := context.WithTimeout(ctx, readQuietPoll)
		fs := cl.PollFetches(pollCtx)
		cancelPoll()
		if err := ctx.Err(); err != nil {
			fail(err)
			return
		}
		got := 0
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			quiet := p.Err == nil || errors.Is(p.Err, context.DeadlineExceeded) || errors.Is(p.Err, context.Canceled)
			r := byTP[topicPartition{p.Topic, p.Partition}]
			if r == nil {
				if !quiet {
					fail(p.Err) // the client's, not a partition's
					open = 0
				}
				return
			}
			if r.ended {
				return
			}
			if !quiet {
				r.recs, r.err = nil, fmt.Errorf("reading %s/%d from %d: %w", r.topic, r.partition, r.from, p.Err)
				end(r)
				return
			}
			for _, rec := range p.Records {
				if rec.Offset >= r.end || len(r.recs) >= r.n {
					end(r)
					return
				}
				r.recs = append(r.recs, rec)
				got++
			}
			if len(r.recs) >= r.n || (len(r.recs) > 0 && r.recs[len(r.recs)-1].Offset+1 >= r.end) {
				end(r)
			}
		})
		if got == 0 {
			break // a quiet poll
		}
	}
	finishAlone(ctx, group)
}

// finishAlone reads on, each on a client of its own as
// kafkaconn.ReadRecords does, the reads a quiet poll left short of their n
// records. For a whole group a quiet poll cannot tell a range whose rest is
// aborted or control data from a partition the shared client did not fetch
// again in time, and a walk that came back short would read as a
// divergence; reads that end by their count, as alignment's do, never get
// here unless the source really holds fewer.
func finishAlone(ctx context.Context, group []*recordRead) {
	var short []*recordRead
	for _, r := range group {
		if !r.ended && r.err == nil && len(r.recs) < r.n {
			short = append(short, r)
		}
	}
	slots := make(chan struct{}, finishAloneAtOnce)
	var wg sync.WaitGroup
	for _, r := range short {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			from := r.from
			if len(r.recs) > 0 {
				from = r.recs[len(r.recs)-1].Offset + 1
			}
			rest, err := kafkaconn.ReadRecords(ctx, r.conn, r.topic, r.partition, from, r.end, r.n-len(r.recs), r.committed, r.extra...)
			if err != nil {
				r.recs, r.err = nil, err
				return
			}
			r.recs = append(r.recs, rest...)
		})
	}
	wg.Wait()
}

// finishAloneAtOnce bounds the reads finishAlone runs at once.
const finishAloneAtOnce = 16
