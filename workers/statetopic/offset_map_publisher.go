package statetopic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	if err := b.producer.ProduceSync(ctx, b.recs...).FirstErr(); err != nil {
		return fmt.Errorf("publish %s to %s: %w", b.what, service.StateTopic, err)
	}
	for _, u := range b.maps {
		u.commit(b.relay.maps)
	}
	b.recs, b.maps, b.bytes = b.recs[:0], b.maps[:0], 0
	return nil
}

// offsetMapUpdate builds the records of the chunks of p's offset map that
// may have changed since the relay last published it: runs change only at
// the end of the map (a save extends or adds runs past the checkpoint) or
// behind a lowered checkpoint (truncation, recreate), so the chunks from
// the run at the lower of the two checkpoints on are re-read and
// published, and chunks that lost every run get a tombstone. A partition
// the relay has not published yet is published whole.
func (r *Relay) offsetMapUpdate(ctx context.Context, p repo.Partition) (mapUpdate, error) {
	id := repo.PartitionID{Mirror: p.Mirror, Topic: p.Topic, Partition: p.Partition}
	u := mapUpdate{id: id}
	prev := r.maps[id]
	part := StatePartition(p.Mirror, r.statePartitions)
	if p.SrcNext == nil || p.DstNext == nil {
		// Nothing mirrored, so nothing mapped: after a recreate, the map
		// published before is gone.
		if prev == nil || len(prev.chunks) == 0 {
			return u, nil
		}
		for c := range prev.chunks {
			u.recs = append(u.recs, &kgo.Record{Topic: service.StateTopic, Partition: part,
				Key: []byte(service.OffsetMapKey(p.Mirror, p.Topic, p.Partition, c))})
		}
		u.next = &publishedMap{srcNext: -1, dstNext: -1, chunks: map[int64]bool{}}
		return u, nil
	}
	if prev != nil && prev.srcNext == *p.SrcNext && prev.dstNext == *p.DstNext {
		return u, nil
	}
	var from int64
	if prev != nil {
		before, _, err := repo.OffsetRunsAround(ctx, r.cfg.Pool, p.Mirror, p.Topic, p.Partition, min(prev.srcNext, *p.SrcNext))
		if err != nil {
			return u, fmt.Errorf("read offset map of %s/%s/%d: %w", p.Mirror, p.Topic, p.Partition, err)
		}
		if before != nil {
			from = service.OffsetMapChunk(before.SrcStart)
		}
	}
	runs, err := repo.OffsetRunsList(ctx, r.cfg.Pool, id, from*service.OffsetMapChunkWidth)
	if err != nil {
		return u, fmt.Errorf("read offset map of %s/%s/%d: %w", p.Mirror, p.Topic, p.Partition, err)
	}
	next := &publishedMap{srcNext: *p.SrcNext, dstNext: *p.DstNext, chunks: map[int64]bool{}}
	if prev != nil {
		for c := range prev.chunks {
			if c < from {
				next.chunks[c] = true
			}
		}
	}
	for _, rec := range service.OffsetMapRecords(id, runs) {
		val, err := json.Marshal(rec)
		if err != nil {
			return u, err
		}
		next.chunks[rec.Chunk] = true
		u.recs = append(u.recs, &kgo.Record{Topic: service.StateTopic, Partition: part,
			Key: []byte(service.OffsetMapKey(p.Mirror, p.Topic, p.Partition, rec.Chunk)), Value: val})
	}
	if prev != nil {
		for c := range prev.chunks {
			if c >= from && !next.chunks[c] {
				u.recs = append(u.recs, &kgo.Record{Topic: service.StateTopic, Partition: part,
					Key: []byte(service.OffsetMapKey(p.Mirror, p.Topic, p.Partition, c))})
			}
		}
	}
	u.next = next
	return u, nil
}

// offsetMapUpdateOf is offsetMapUpdate for a partition named by an outbox
// row; a partition deleted since has nothing to publish.
func (r *Relay) offsetMapUpdateOf(ctx context.Context, id repo.PartitionID) (mapUpdate, error) {
	p, err := repo.PartitionsGet(ctx, r.cfg.Pool, id.Mirror, id.Topic, id.Partition)
	if errors.Is(err, repo.ErrNotFound) {
		return mapUpdate{id: id}, nil
	} else if err != nil {
		return mapUpdate{}, err
	}
	return r.offsetMapUpdate(ctx, p)
}

// partitionOfKey names the partition of a partition/<mirror>/<topic>/<p>
// key (names never hold a slash).
func partitionOfKey(key string) (repo.PartitionID, bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "partition" {
		return repo.PartitionID{}, false
	}
	p, err := strconv.ParseInt(parts[3], 10, 32)
	if err != nil {
		return repo.PartitionID{}, false
	}
	return repo.PartitionID{Mirror: parts[1], Topic: parts[2], Partition: int32(p)}, true
}
