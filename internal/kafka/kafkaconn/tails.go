package kafkaconn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ListCommittedEnds lists the last stable offset (what read_committed can
// see) of every partition of topics, in one request, connecting afresh. Any
// failure to get an answer within timeout is an *UnreachableError that
// names the bootstrap servers; a bad Config is returned as is. A topic the
// cluster does not have is listed under partition -1 with its error, as
// kadm does.
func ListCommittedEnds(ctx context.Context, c Config, topics []string, timeout time.Duration) (kadm.ListedOffsets, error) {
	adm, err := c.NewAdmin(append(ProbeOpts(timeout), kgo.WithHooks(NewBrokerWatch(nil)))...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, &UnreachableError{Servers: c.BootstrapServers, Timeout: timeout, Err: err}
	}
	return ends, nil
}

// tailWindows are how far back from a partition's end LastCommittedRecord
// reads, one window after the other. The first covers a transaction's
// commit marker (end-1) and a few records before it; the second a short
// aborted transaction at the tail.
var tailWindows = []int64{8, 512}

// LastCommittedRecord returns the last committed record at an offset in
// [from, end), where end is a last stable offset, reading back from end a
// window at a time rather than from `from` (which may be far behind). It
// returns nil when [from, end) holds only transaction markers and aborted
// records, and also when the last window that does not reach back to from
// holds none: a longer aborted tail is not worth reading through. Failing
// to read within timeout is an *UnreachableError.
func LastCommittedRecord(ctx context.Context, c Config, topic string, partition int32, from, end int64, timeout time.Duration) (*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, w := range tailWindows {
		start := max(from, end-w)
		rs, err := readTailWindow(ctx, c, topic, partition, start, end, timeout)
		if err != nil {
			return nil, err
		}
		if r := lastData(rs); r != nil {
			return r, nil
		}
		if start == from {
			break
		}
	}
	return nil, nil
}

// FirstCommittedRecord returns the first committed record at an offset in
// [from, end), where end is a last stable offset, reading forward from
// from a window at a time (LastCommittedRecord's windows, mirrored). It
// returns nil when [from, end) holds only transaction markers and aborted
// records, and also when the windows read hold none: a longer aborted
// stretch is not worth reading through. Failing to read within timeout is
// an *UnreachableError.
func FirstCommittedRecord(ctx context.Context, c Config, topic string, partition int32, from, end int64, timeout time.Duration) (*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := from
	for _, w := range tailWindows {
		stop := min(start+w, end)
		if start >= stop {
			break
		}
		rs, err := readTailWindow(ctx, c, topic, partition, start, stop, timeout)
		if err != nil {
			return nil, err
		}
		if r := firstData(rs); r != nil {
			return r, nil
		}
		start = stop
	}
	return nil, nil
}

// CommittedTail is what a partition holds in [from, end) past a mirror's
// progress, end being a last stable offset.
type CommittedTail struct {
	// First is the first committed record in the range: the oldest a
	// failover now would leave behind; nil as FirstCommittedRecord returns
	// it.
	First *kgo.Record
	// Last is the last committed record in the range, nil as
	// LastCommittedRecord returns it.
	Last *kgo.Record
	// Records counts the committed data records in the range: transaction
	// markers and aborted records are not records anyone will read. Known
	// only when Counted.
	Records int64
	Counted bool
}

// ReadCommittedTail returns the range's last committed record and, when the
// range is no longer than LastCommittedRecord's longest window (which it
// would read whole anyway), how many committed data records it holds, from
// one read. A longer range is read back from end as LastCommittedRecord
// does and not counted: the records between could be gigabytes. Failing to
// read within timeout is an *UnreachableError.
func ReadCommittedTail(ctx context.Context, c Config, topic string, partition int32, from, end int64, timeout time.Duration) (CommittedTail, error) {
	if end-from > tailWindows[len(tailWindows)-1] {
		r, err := LastCommittedRecord(ctx, c, topic, partition, from, end, timeout)
		if err != nil {
			return CommittedTail{}, err
		}
		first, err := FirstCommittedRecord(ctx, c, topic, partition, from, end, timeout)
		return CommittedTail{First: first, Last: r}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := readTailWindow(ctx, c, topic, partition, from, end, timeout)
	if err != nil {
		return CommittedTail{}, err
	}
	t := CommittedTail{First: firstData(rs), Last: lastData(rs), Counted: true}
	for _, r := range rs {
		if !r.Attrs.IsControl() {
			t.Records++
		}
	}
	return t, nil
}

// readTailWindow reads the committed records and markers of [start, end).
// Markers are kept so the read sees offset end-1 whatever it holds and
// ends there, instead of waiting on a quiet poll to learn that the rest
// was control data.
func readTailWindow(ctx context.Context, c Config, topic string, partition int32, start, end int64, timeout time.Duration) ([]*kgo.Record, error) {
	opts := append(ProbeOpts(timeout), kgo.KeepControlRecords(), kgo.WithHooks(NewBrokerWatch(nil)))
	rs, err := ReadRecords(ctx, c, topic, partition, start, end, int(end-start), true, opts...)
	if err != nil {
		return nil, &UnreachableError{Servers: c.BootstrapServers, Timeout: timeout, Err: err}
	}
	return rs, nil
}

// firstData is the first of rs that is not a transaction marker, nil if
// none.
func firstData(rs []*kgo.Record) *kgo.Record {
	for _, r := range rs {
		if !r.Attrs.IsControl() {
			return r
		}
	}
	return nil
}

// lastData is the last of rs that is not a transaction marker, nil if none.
func lastData(rs []*kgo.Record) *kgo.Record {
	for i := len(rs) - 1; i >= 0; i-- {
		if !rs[i].Attrs.IsControl() {
			return rs[i]
		}
	}
	return nil
}
