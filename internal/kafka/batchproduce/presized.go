package batchproduce

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// presized is a produce request that makes room for its batches before kmsg
// encodes it. kgo encodes each request into a buffer from its pool, which
// starts small; appending megabytes of batches to it would grow it by
// doubling, copying the batches about twice more. Everything else is the
// request's
// own: kgo sends it on the broker's produce connection (its key), with the
// timeout it carries.
type presized struct{ *kmsg.ProduceRequest }

// framing bounds what a request adds to its batches per topic and per
// partition (names, ids, counts, lengths, tagged fields).
const framing = 64

func (r presized) AppendTo(dst []byte) []byte {
	n := framing
	for _, t := range r.Topics {
		n += framing + len(t.Topic)
		for _, p := range t.Partitions {
			n += framing + len(p.Records)
		}
	}
	return r.ProduceRequest.AppendTo(slices.Grow(dst, n))
}
