package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/testing/fetchanswer"
	"kmirror/internal/testing/legacyformat"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// legacyLog is a source partition of 30 records written in the old message
// formats, as a broker before 4.0 serves a topic whose
// message.format.version predates 0.11: offsets 0-9 as v0 messages (no
// timestamp), 10-19 as v1 messages, 20-29 as gzip-compressed v1 wrappers
// of five.
type legacyLog struct{ base int64 }

const legacyRecords = 30

func (l legacyLog) key(i int64) []byte   { return fmt.Appendf(nil, "legacy-k%d", i) }
func (l legacyLog) value(i int64) []byte { return fmt.Appendf(nil, "legacy-v%d", i) }

// from is the message set a broker answers a fetch at offset with: the
// message or wrapper that holds offset, and the rest of the log.
func (l legacyLog) from(offset int64) []byte {
	var out []byte
	for i := int64(0); i < legacyRecords; {
		switch {
		case i < 10:
			if i >= offset {
				out = append(out, legacyformat.Message(0, 0, i, 0, l.key(i), l.value(i))...)
			}
			i++
		case i < 20:
			if i >= offset {
				out = append(out, legacyformat.Message(1, 0, i, l.base+i, l.key(i), l.value(i))...)
			}
			i++
		default:
			if i+5 > offset {
				var rs []legacyformat.Record
				for j := i; j < i+5; j++ {
					rs = append(rs, legacyformat.Record{Key: l.key(j), Value: l.value(j), Timestamp: l.base + j})
				}
				out = append(out, legacyformat.GzipWrapper(i, rs)...)
			}
			i += 5
		}
	}
	return out
}

// TestScenarioLegacyMessageFormatsAreCopied names the one case batches
// cannot be copied as they are: a source serving message formats v0 and
// v1. kfake stores only v2 batches, so the source holds 30 records (for
// its offsets and end) and answers the mirror's fetches with the same
// offsets written in the old formats. Each message set is built again as
// a v2 batch: the destination holds the 30 records at the same offsets,
// with their keys, values and timestamps (none for v0), and the partition
// mirrors on.
func TestScenarioLegacyMessageFormatsAreCopied(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("legacy", 1, nil); err != nil {
		t.Fatal(err)
	}
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), seq("legacy", 0, "v2", legacyRecords)...)
	id := env.sourceTopicID("legacy")
	log := legacyLog{base: time.Now().Add(-time.Hour).UnixMilli()}
	src := env.Clusters.Source
	src.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return nil, nil, false
		}
		rt, rp := fr.Topics[0], fr.Topics[0].Partitions[0]
		if (rt.Topic != "legacy" && rt.TopicID != id) || rp.FetchOffset >= legacyRecords {
			return nil, nil, false // caught up: kfake long-polls
		}
		return fetchanswer.One(fr, rt, 0, func(sp *kmsg.FetchResponseTopicPartition) {
			sp.HighWatermark, sp.LastStableOffset = legacyRecords, legacyRecords
			sp.RecordBatches = log.from(rp.FetchOffset)
		}), nil, true
	})
	env.CreateMirror("m", "legacy")
	env.StartInstance("i1")
	// Not WaitEndsEqual: kgo reads a v0 message's missing timestamp as the
	// zero time, a v2 record's as -1 ms.
	dst := workertest.Plain(env.Clusters.DestinationAddr())
	workertest.WaitFor(t, 30*time.Second, "the destination to hold the 30 records", func() (bool, string) {
		end := workertest.EndOffsets(t, dst, "legacy")[0]
		return end == legacyRecords, fmt.Sprintf("destination end %d", end)
	})
	env.WaitStates("m", service.StateMirroring, 20*time.Second)
	got := workertest.ReadAll(t, env.Clusters.DestinationAddr(), "legacy", 0, false)
	if len(got) != legacyRecords {
		t.Fatalf("the destination holds %d records, want %d", len(got), legacyRecords)
	}
	for i, r := range got {
		o := int64(i)
		ts := log.base + o
		if o < 10 {
			ts = -1 // v0: no timestamp
		}
		if r.Offset != o || string(r.Key) != string(log.key(o)) || string(r.Value) != string(log.value(o)) || r.Timestamp.UnixMilli() != ts {
			t.Fatalf("destination record %d: offset %d key %q value %q timestamp %d; want %q %q %d",
				i, r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), log.key(o), log.value(o), ts)
		}
	}
}
