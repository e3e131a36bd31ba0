package service

import (
	"fmt"

	"kmirror/repo"
)

// OffsetMapChunkWidth is how many source offsets one offset-map record of
// __mirror_state covers. A partition's whole map in one value would outgrow
// the broker's max.message.bytes on a transactional source (a run per
// transaction), so the map is published in chunks keyed by the source
// offset its runs start at: a run belongs to the chunk of its src_start,
// which never changes (runs grow at their end, truncation shortens them).
// A new run starts where the source skips offsets (a transaction marker,
// aborted or compacted records) or where a mirroring session starts, so a
// chunk holds at most OffsetMapChunkWidth runs (each maps an offset at
// least): under 700 KB of JSON at worst, below the default 1 MB
// max.message.bytes, and a few hundred bytes on a plain source.
const OffsetMapChunkWidth int64 = 16384

// OffsetMapChunk is the chunk that a run starting at srcStart belongs to.
func OffsetMapChunk(srcStart int64) int64 { return srcStart / OffsetMapChunkWidth }

// OffsetMapKey is the __mirror_state key of one chunk of a partition's
// offset map. Compaction keeps its newest value, which carries every run of
// the chunk as it was then.
func OffsetMapKey(mirror, topic string, p int32, chunk int64) string {
	return fmt.Sprintf("offsets/%s/%s/%d/%d", mirror, topic, p, chunk)
}

// OffsetMapRecord is one chunk of a partition's offset map as published to
// __mirror_state. Runs are [src_start, dst_start, count] in source order.
type OffsetMapRecord struct {
	Version   int        `json:"version"`
	Mirror    string     `json:"mirror"`
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"`
	Chunk     int64      `json:"chunk"`
	Runs      [][3]int64 `json:"runs"`
}

// OffsetMapRecords groups a partition's runs, in source order, into chunk
// records, one per chunk that holds a run.
func OffsetMapRecords(id repo.PartitionID, runs []repo.OffsetRun) []OffsetMapRecord {
	var out []OffsetMapRecord
	for _, r := range runs {
		c := OffsetMapChunk(r.SrcStart)
		if n := len(out); n == 0 || out[n-1].Chunk != c {
			out = append(out, OffsetMapRecord{Version: RecordVersion, Mirror: id.Mirror, Topic: id.Topic,
				Partition: id.Partition, Chunk: c})
		}
		out[len(out)-1].Runs = append(out[len(out)-1].Runs, [3]int64{r.SrcStart, r.DstStart, r.Count})
	}
	return out
}
