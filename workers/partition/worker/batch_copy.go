package worker

import (
	"fmt"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/recordbatch"
)

// copyBatches copies a partition's fetched batches in
// order: whole where the destination takes them as they are, re-encoded
// where it does not (recordbatch.WholeCopyProblem). Markers and aborted
// transactions' batches are never produced; the checkpoint passes them
// once every copy before them is acknowledged. The producer rewrites a
// whole batch's header in place (Batch.Produced): the fetched bytes are
// the session's, and nothing reads them once they are handed over. The
// caller holds s.mu and has checked the batch's error and the lease.
func (s *session) copyBatches(b FetchBatch) {
	w := s.w
	keep := recordbatch.NewCommitted(b.Aborted)
	for i := range b.Batches {
		bt := &b.Batches[i]
		if bt.NextOffset() <= s.fetchNext {
			continue // already copied (a re-fetch after re-adding)
		}
		kept, err := keep.Keep(bt)
		if err != nil {
			s.failure = retryable("source batch at offset %d: %v", bt.BaseOffset, err)
			return
		}
		var payload *recordbatch.Batch
		var sources []int64 // a re-encoded batch's source offsets
		if kept {
			if payload, sources, err = s.payloadOf(bt); err != nil {
				// Nothing of this batch was produced, nor is anything after it.
				s.failure = retryable("source batch of %s/%d at offset %d: %v", w.key.Topic, w.key.Partition, bt.BaseOffset, err)
				return
			}
		}
		if payload == nil {
			from := max(bt.BaseOffset, s.fetchNext)
			s.pending = append(s.pending, pendingRun{src: from, n: bt.NextOffset() - from, control: true})
			s.fetchNext = bt.NextOffset()
			continue
		}
		n := int64(payload.Records())
		deadline := s.admit(n)
		if deadline == nil {
			return
		}
		first := bt.BaseOffset
		if sources == nil {
			s.addRun(bt.BaseOffset, n)
		} else {
			first = sources[0]
			for _, src := range sources {
				s.addRun(src, 1)
			}
		}
		s.stamps = append(s.stamps, batchStamp{src: first, next: bt.NextOffset(), ts: payload.FirstRecordTimestamp()})
		s.fetchNext = bt.NextOffset()
		size := int64(len(payload.Raw))
		w.p.Copy.Produce(s.produceCtx, s.dest, w.key.Partition, sentBatch{Batch: payload, s: s, d: deadline}, func(r batchproduce.Result) {
			s.acks.PromiseBatch(n, size, r.BaseOffset, r.Err)
		})
	}
	s.passControls()
}

// payloadOf is the batch to produce for a kept source batch: the batch
// itself, or, when the destination would refuse or restamp it as it is or
// the mirror asks for another codec (mirror.compression.type), a new one
// of its records from the session's next offset, with their source
// offsets. It is nil when no record is left to copy.
func (s *session) payloadOf(bt *recordbatch.Batch) (*recordbatch.Batch, []int64, error) {
	codec, why := bt.Codec(), bt.WholeCopyProblem(s.fetchNext)
	if want, ok := s.w.p.Copy.Recompression(s.w.key.Mirror); ok && want != codec {
		codec = want
		if why == "" {
			why = "recompressed"
		}
	}
	if why == "" {
		s.w.cfg.Metrics.BatchCopied(s.w.key.Mirror, s.w.key.Topic, "whole")
		return bt, nil, nil
	}
	s.w.cfg.Metrics.BatchCopied(s.w.key.Mirror, s.w.key.Topic, why)
	raw, re, err := s.w.cfg.Codecs.Reencode(nil, bt, s.fetchNext, codec, 0, 0, 0)
	if err != nil || len(re.Sources) == 0 {
		return nil, nil, err
	}
	out, err := recordbatch.Split(raw)
	if err != nil || len(out) != 1 {
		return nil, nil, fmt.Errorf("re-encoded batch: %v", err)
	}
	return &out[0], re.Sources, nil
}

// addRun records n copies from source offset src to the next destination
// offsets, extending the last pending run when both sides follow on.
func (s *session) addRun(src, n int64) {
	if k := len(s.pending); k > 0 && !s.pending[k-1].control &&
		s.pending[k-1].src+s.pending[k-1].n == src && s.pending[k-1].dst+s.pending[k-1].n == s.produced {
		s.pending[k-1].n += n
	} else {
		s.pending = append(s.pending, pendingRun{src: src, dst: s.produced, n: n})
	}
	s.produced += n
}
