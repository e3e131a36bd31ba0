package produce

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Options decide how the destination producer batches, buffers and fails
// records.
func Options(deliveryTimeout time.Duration) []kgo.Opt {
	return []kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Not RecordDeliveryTimeout: kgo measures it from the record's
		// timestamp, which mirroring preserves. Each produce carries a
		// context deadline instead (see the mirroring session's handleBatch).
		kgo.ProduceRequestTimeout(deliveryTimeout),
		// No linger: records arrive in fetched batches already, and kgo
		// batches whatever queues while a request is in flight. A 5 ms
		// linger costs 5 ms of latency at 5,000 records/s and no throughput
		// (docs/benchmarks/latency.md, "Latency").
		kgo.ProducerLinger(0),
		// No limit here: Gate bounds what is buffered, because a record kgo
		// fails while it waits for room breaks the order of results.
		kgo.MaxBufferedRecords(math.MaxInt32),
	}
}
