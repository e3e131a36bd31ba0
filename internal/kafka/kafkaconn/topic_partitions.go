package kafkaconn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicPartitions lists every topic on the cluster, internal and
// "__"-prefixed ones included (the caller filters), with its partition
// count. Topics the metadata reports an error for (still being created, say)
// are left out; they show up on a later call.
//
// It connects afresh, so it doubles as a reachability check. Any failure to
// get an answer within timeout (unreachable, TLS or SASL refused) is an
// *UnreachableError that names the bootstrap servers; a bad Config is
// returned as is.
func TopicPartitions(ctx context.Context, c Config, timeout time.Duration) (map[string]int32, error) {
	adm, err := c.NewAdmin(append(ProbeOpts(timeout), kgo.WithHooks(NewBrokerWatch(nil)))...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	details, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, &UnreachableError{Servers: c.BootstrapServers, Timeout: timeout, Err: err}
	}
	out := make(map[string]int32, len(details))
	for name, d := range details {
		if d.Err == nil {
			out[name] = int32(len(d.Partitions))
		}
	}
	return out, nil
}

// ProbeOpts bound a one-shot request by timeout. kgo gives up retrying a bit
// before the context expires, so a refused or failed dial is reported as
// such; a broker that accepts but never answers ends at the context deadline.
func ProbeOpts(timeout time.Duration) []kgo.Opt {
	return []kgo.Opt{
		kgo.DialTimeout(max(timeout/2, 100*time.Millisecond)),
		kgo.RetryTimeout(max(timeout*3/4, 100*time.Millisecond)),
		kgo.RetryBackoffFn(func(int) time.Duration { return max(timeout/20, 10*time.Millisecond) }),
	}
}
