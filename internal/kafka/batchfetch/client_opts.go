package batchfetch

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config's response bounds.
const (
	defaultMaxBytes          = 50 << 20
	defaultPartitionMaxBytes = 1 << 20
)

// ResponseOverhead is what a fetch response may hold besides its records:
// topic and partition headers and aborted-transaction lists.
const ResponseOverhead = 1 << 20

// ReadOverhead is how long past a fetch's max wait its answer may take to
// arrive whole (kgo's read deadline; its default, named here as a choice):
// a broker that trickles an answer holds its buffer no longer. Shorter
// would cut a full answer (MaxBytes) over a link slower than about 5 MB/s,
// which would then be asked for, and cut, again and again.
const ReadOverhead = 10 * time.Second

// ClientOpts bounds what kgo reads from a source for a fetcher with these
// max bytes (0: the default): kgo allocates a response's whole claimed
// size before reading it, so a broker that claims more than the request
// allows is refused before anything is allocated (kgo closes the
// connection), rather than held while it trickles in. A slow answer is cut
// by kgo's read deadline, the request's max wait plus its timeout
// overhead (ReadOverhead). The same clients read metadata, which a cluster
// of many partitions keeps far below this.
func ClientOpts(maxBytes int32) []kgo.Opt {
	maxBytes = cmp.Or(maxBytes, defaultMaxBytes)
	return []kgo.Opt{kgo.FetchMaxBytes(maxBytes), kgo.BrokerMaxReadBytes(maxBytes + ResponseOverhead),
		kgo.RequestTimeoutOverhead(ReadOverhead)}
}
