package statetopic

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/repo"
	"kmirror/service"
)

// publishedMap is what the relay last published of one partition's offset
// map: the checkpoint it was read at and the chunks that hold runs.
type publishedMap struct {
	srcNext, dstNext int64
	chunks           map[int64]bool
}

// mapUpdate is the offset-map records of one partition for a checkpoint
// pass, and what is published once they are acknowledged.
type mapUpdate struct {
	id   repo.PartitionID
	recs []*kgo.Record
	next *publishedMap // nil: nothing changed
}

func (u mapUpdate) commit(maps map[repo.PartitionID]*publishedMap) {
	if u.next != nil {
		maps[u.id] = u.next
	}
}

// publishBatchBytes bounds what a relay pass holds in memory before it
// produces: publishing every offset map at once (when a relay starts
// leading) could otherwise hold them all.
const publishBatchBytes = 8 << 20

// publishBatch produces records in order, a bounded batch at a time, and
// remembers each published offset map once it is acknowledged.
type publishBatch struct {
	relay    *Relay
	producer *kgo.Client
	what     string
	recs     []*kgo.Record
	maps     []mapUpdate
	bytes    int
}

// add queues a partition's map update, then rec, producing first when the
// batch is full. Records of one partition keep their order across flushes.
func (b *publishBatch) add(ctx context.Context, u mapUpdate, rec *kgo.Record) error {
	for _, r := range u.recs {
		b.bytes += len(r.Key) + len(r.Value)
	}
	b.recs = append(append(b.recs, u.recs...), rec)
	b.bytes += len(rec.Key) + len(rec.Value)
	if u.next != nil {
		b.maps = append(b.maps, u)
	}
	if b.bytes >= b.relay.batchBytes {
		return b.flush(ctx)
	}
	return nil
}

func (b *publishBatch) flush(ctx context.Context) error {
	if len(b.recs) == 0 {
		return nil
	}
	if err := produceAll(ctx, b.producer, b.recs); err != nil {
		return fmt.Errorf("publish %s to %s: %w", b.what, service.StateTopic, err)
	}
	for _, u := range b.maps {
		u.commit(b.relay.maps)
	}
	b.recs, b.maps, b.bytes = b.recs[:0], b.maps[:0], 0
	return nil
}

// errPublishTimeout ends a publish whose records were not all acknowledged
// within publishTimeout.
var errPublishTimeout = fmt.Errorf("not acknowledged within %s", publishTimeout)

// produceAll produces recs and waits for every acknowledgement, at most
// publishTimeout: unlike ProduceSync, it returns when ctx ends even while
// kgo still retries records already sent. The relay then abandons the
// producer, which fails what it still holds.
func produceAll(ctx context.Context, producer *kgo.Client, recs []*kgo.Record) error {
	wait, cancel := context.WithTimeoutCause(ctx, publishTimeout, errPublishTimeout)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		left  = len(recs)
		done  = make(chan struct{})
	)
	for _, rec := range recs {
		producer.Produce(wait, rec, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if left--; left == 0 {
				close(done)
			}
		})
	}
	select {
	case <-done:
		mu.Lock()
		defer mu.Unlock()
		return first
	case <-wait.Done():
		return context.Cause(wait)
	}
}

// offsetMapUpdates builds, for each of parts (current rows), the records
// of the chunks of its offset map that may have changed since the relay
// last published it, reading all their runs in one statement. Runs change
// only at the end of the map (a save extends or adds runs past the
// checkpoint) or behind a lowered checkpoint (truncation), so the chunks
// from the run at the lower of the two checkpoints on are re-read and
// published, and chunks that lost every run get a tombstone. A partition
// the relay has not published yet is published whole; one without a
// checkpoint (recreated) has its published chunks tombstoned.
func (r *Relay) offsetMapUpdates(ctx context.Context, parts []repo.Partition) ([]mapUpdate, error) {
	out := make([]mapUpdate, len(parts))
	var read []repo.OffsetRunsFrom
	for i, p := range parts {
		id := repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}
		out[i].id = id
		prev := r.maps[id]
		switch {
		case p.SrcNext == nil || p.DstNext == nil:
			if prev != nil && len(prev.chunks) > 0 {
				for c := range prev.chunks {
					out[i].recs = append(out[i].recs, r.offsetMapRecord(id, c, nil))
				}
				out[i].next = &publishedMap{srcNext: -1, dstNext: -1, chunks: map[int64]bool{}}
			}
		case prev != nil && prev.srcNext == *p.SrcNext && prev.dstNext == *p.DstNext:
			// Unchanged since it was published.
		case prev == nil:
			read = append(read, repo.OffsetRunsFrom{ID: id, Src: -1})
		default:
			read = append(read, repo.OffsetRunsFrom{ID: id, Src: min(prev.srcNext, *p.SrcNext)})
		}
	}
	if len(read) == 0 {
		return out, nil
	}
	reads, err := repo.OffsetRunsListFrom(ctx, r.cfg.Pool, read, service.OffsetMapChunkWidth)
	if err != nil {
		return nil, fmt.Errorf("read offset maps: %w", err)
	}
	for i, p := range parts {
		got, ok := reads[out[i].id]
		if !ok {
			continue // not read: nothing changed
		}
		id, prev := out[i].id, r.maps[out[i].id]
		next := &publishedMap{srcNext: *p.SrcNext, dstNext: *p.DstNext, chunks: map[int64]bool{}}
		for _, rec := range service.OffsetMapRecords(id, got.Runs) {
			val, err := json.Marshal(rec)
			if err != nil {
				return nil, err
			}
			next.chunks[rec.Chunk] = true
			out[i].recs = append(out[i].recs, r.offsetMapRecord(id, rec.Chunk, val))
		}
		if prev != nil {
			from := service.OffsetMapChunk(got.FromSrc)
			for c := range prev.chunks {
				switch {
				case c < from:
					next.chunks[c] = true // not read again: as published
				case !next.chunks[c]:
					out[i].recs = append(out[i].recs, r.offsetMapRecord(id, c, nil)) // lost every run
				}
			}
		}
		out[i].next = next
	}
	return out, nil
}

// offsetMapRecord is one chunk's record; a nil value is its tombstone.
func (r *Relay) offsetMapRecord(id repo.PartitionID, chunk int64, val []byte) *kgo.Record {
	return &kgo.Record{Topic: service.StateTopic, Partition: StatePartition(id.Mirror, r.statePartitions),
		Key: []byte(service.OffsetMapKey(id.Mirror, id.Topic, id.Partition, chunk)), Value: val}
}
