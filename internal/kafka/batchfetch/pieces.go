package batchfetch

import (
	"kmirror/internal/kafka/leaders"
	"kmirror/internal/kafka/recordbatch"
)

// pieces is what is left to hand over of one partition's part of a
// response.
type pieces struct {
	p    *partition
	tp   leaders.TopicPartition
	rest []Fetched
}

// split cuts a partition's part of a response into runs of whole batches
// of about size bytes (at least one batch each). Each run carries the
// aborted transactions still open where it starts, so that a
// recordbatch.Committed over it alone keeps what one over the whole part
// would: a transaction whose abort marker an earlier run held is not
// listed again, or a later committed transaction of the same producer
// would be dropped.
func split(out Fetched, size int) []Fetched {
	if out.Err != nil || len(out.Batches) == 0 {
		return []Fetched{out}
	}
	var runs []Fetched
	keep := recordbatch.NewCommitted(out.Aborted)
	aborted := out.Aborted
	for batches := out.Batches; len(batches) > 0; {
		n, bytes := 0, 0
		for n < len(batches) && (n == 0 || bytes+len(batches[n].Raw) <= size) {
			bytes += len(batches[n].Raw)
			n++
		}
		run := out
		run.Batches, run.Aborted = batches[:n:n], aborted
		runs = append(runs, run)
		if n == len(batches) {
			break
		}
		for i := range n {
			if _, err := keep.Keep(&batches[i]); err != nil {
				// An unreadable marker fails its partition in the run
				// that holds it; the rest goes on in one run, unread.
				rest := out
				rest.Batches, rest.Aborted = batches[n:], aborted
				return append(runs, rest)
			}
		}
		aborted = keep.Open()
		batches = batches[n:]
	}
	return runs
}
