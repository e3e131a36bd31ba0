package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reencodeLegacy builds a v2 batch from a message set older than v2 (a
// plain message, or a wrapper whose compressed value holds the messages):
// the one case in which batches cannot be copied, since those formats have
// no producer fields, and brokers before 4.0 still serve topics written in
// them. kgo reads the messages, as its consumer does (CRC, decompression,
// relative offsets, log-append time), and the records keep their keys,
// values and offsets; a v0 message has no timestamp, which v2 writes as
// -1, as a broker converting up does. c.mu is held.
func (c *Codecs) reencodeLegacy(dst []byte, b *Batch, from int64, codec Codec, pid int64, epoch int16, seq int32) ([]byte, Reencoded, error) {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = math.MaxInt64, math.MaxInt64, b.Raw
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: from}, &rp, c.inflaterLocked(), func(kgo.FetchBatchMetrics) {})
	if fp.Err != nil {
		var tooLarge *kgo.ErrDecompressTooLarge // kgo's wrapping of ErrInflateBound
		if errors.Is(fp.Err, ErrInflateBound) || errors.As(fp.Err, &tooLarge) {
			return dst, Reencoded{}, checkFailed(b.BaseOffset, "message format v%d: its records %v", b.Magic, c.inflater.exceeded())
		}
		return dst, Reencoded{}, fmt.Errorf("%w: message format v%d at offset %d: %v", ErrCorrupt, b.Magic, b.BaseOffset, fp.Err)
	}
	// A message's offset is its last record's (a wrapper's, its last inner
	// message's): the records read must go up to it, not past it, and
	// never back, or they would take offsets that are not theirs.
	for i, r := range fp.Records {
		if r.Offset > b.BaseOffset || (i > 0 && r.Offset <= fp.Records[i-1].Offset) {
			return dst, Reencoded{}, checkFailed(b.BaseOffset, "message format v%d: record %d has offset %d, not increasing up to the message's offset",
				b.Magic, i, r.Offset)
		}
	}
	var (
		out          Reencoded
		records      []byte
		first, maxTS int64
		n            int32
	)
	for _, r := range fp.Records {
		if r.Offset < from {
			continue
		}
		ts := int64(-1)
		if b.Magic >= 1 {
			ts = r.Timestamp.UnixMilli()
		}
		if n == 0 {
			first, maxTS = ts, ts
		}
		maxTS = max(maxTS, ts)
		rec := kmsg.Record{OffsetDelta: n, TimestampDelta64: ts - first, Key: r.Key, Value: r.Value}
		rec.TimestampDelta = int32(rec.TimestampDelta64)
		body := rec.AppendTo(nil)[1:] // the zero length is one byte
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
		out.Sources = append(out.Sources, r.Offset)
		n++
	}
	if n == 0 {
		return dst, out, nil
	}
	dst, err := c.appendBatch(dst, records, n, first, maxTS, codec, pid, epoch, seq)
	return dst, out, err
}
