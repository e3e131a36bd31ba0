package batchfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/leaders"
	"kmirror/internal/kafka/recordbatch"
)

// BadBatchError says a partition's fetched bytes fail a check
// (recordbatch.Fetched, a partial batch no size limit explains, a corrupt
// batch): the source's answer is not a log Kafka would serve, so nothing
// of it, nor anything after it, is handed on, and the partition is not
// fetched again until it is added again.
type BadBatchError struct {
	Topic     string
	Partition int32
	// Offset is where the bad batch starts, or the position asked when
	// there is no batch to name.
	Offset int64
	// Err is the check that failed.
	Err error
}

func (e *BadBatchError) Error() string {
	return fmt.Sprintf("the source sent a bad batch for %s/%d at offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *BadBatchError) Unwrap() error { return e.Err }

// checkBatches checks one partition's fetched batches against the
// response (recordbatch.Fetched); before is how many record bytes the
// response held ahead of this partition's. A partition's part that holds
// no whole batch but the start of one is legitimate only where a size
// limit cut it: its batch is larger than the partition's max bytes asked
// (it is asked for again once, with room for it), or the response was full
// before it. f.mu is held.
func (b *brokerLoop) checkBatches(tp leaders.TopicPartition, p *partition, r requested, rp *kmsg.FetchResponseTopicPartition,
	batches []recordbatch.Batch, before int) (err error, again bool) {
	bad := func(offset int64, err error) error {
		return &BadBatchError{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, Err: err}
	}
	if len(batches) == 0 {
		partial, size := recordbatch.PartialFirst(rp.RecordBatches)
		if !partial {
			return nil, false
		}
		maxBytes := int64(b.f.cfg.MaxBytes)
		switch {
		case size > maxBytes:
			return bad(r.offset, fmt.Errorf("a batch of %d bytes, more than a fetch response may hold (%d)", size, maxBytes)), false
		case size > int64(r.maxBytes) && p.wantBytes == 0:
			p.wantBytes = int32(size)
			return nil, true
		case int64(before)+size > maxBytes:
			return nil, false // the response was full; the next one has room
		}
		return bad(r.offset, fmt.Errorf("%d bytes of a %d-byte batch, where the %d bytes asked for would hold it whole",
			len(rp.RecordBatches), size, r.maxBytes)), false
	}
	atBoundary := p.boundary && p.offset == r.offset
	if err := recordbatch.Fetched(batches, r.offset, rp.HighWatermark, atBoundary); err != nil {
		offset := r.offset
		if ce, ok := err.(*recordbatch.CheckError); ok {
			offset = ce.Offset
		}
		return bad(offset, err), false
	}
	return nil, false
}
