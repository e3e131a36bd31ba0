package partition_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/fetchanswer"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioSourceLogTruncatedUnderTheMirror: the source leader's log is
// truncated under a running mirror (an unclean leader election: the new
// leader's log ends the epoch the mirror last read at offset 60, while the
// mirror had copied up to 100). kfake cannot truncate a log, so its fetch
// answers as such a leader does (KIP-320's diverging epoch), for the fetch
// that names the epoch of the last batch the mirror read. The partition
// goes FAILED, not retried, with an error naming the truncation, and
// copies nothing more: the 20 records written on the source afterwards do
// not reach the destination.
func TestScenarioSourceLogTruncatedUnderTheMirror(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	env.startMirrored("trunc", 1, 100)
	id := env.sourceTopicID("trunc")
	named := make(chan int32, 1)
	answered := false
	src := env.Clusters.Source
	src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		for _, rt := range fr.Topics {
			if answered || (rt.Topic != "trunc" && rt.TopicID != id) {
				continue
			}
			for _, rp := range rt.Partitions {
				if rp.FetchOffset < 100 || rp.LastFetchedEpoch < 0 {
					continue
				}
				answered = true
				named <- rp.LastFetchedEpoch
				return fetchanswer.One(fr, rt, rp.Partition, func(sp *kmsg.FetchResponseTopicPartition) {
					sp.HighWatermark, sp.LastStableOffset = 120, 120
					sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = rp.LastFetchedEpoch, 60
				}), nil, true
			}
		}
		return nil, nil, false
	})
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("trunc", 0, "after", 20)...)
	select {
	case <-named:
	case <-time.After(30 * time.Second):
		t.Fatal("no fetch of trunc/0 from offset 100 named the epoch of the last batch read")
	}
	p := env.waitPartition("m", "trunc", 0, 30*time.Second, "FAILED on the truncation", func(p repo.Partition) bool {
		return p.State == service.StateFailed
	})
	if p.Retryable || !strings.Contains(p.Error, "was truncated") || !strings.Contains(p.Error, "ends at offset 60") {
		t.Fatalf("FAILED with %q (retryable %v), want a permanent error naming the truncation at 60", p.Error, p.Retryable)
	}
	if end := workertest.EndOffsets(t, workertest.Plain(env.Clusters.DestinationAddr()), "trunc")[0]; end != 100 {
		t.Fatalf("the destination ends at %d; nothing after the truncation may be copied (100)", end)
	}
}
