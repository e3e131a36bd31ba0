package partition_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestScenarioCrashTakeoverTrustsTheDestinationEnd: after a crash, a
// partition whose destination ends exactly at its checkpoint, on a source
// with topic ids, is proven aligned by that end and by the source topic's
// id: the new owner resumes it without reading a record back on either
// cluster (design.md's E = d), and the copy goes on exact. A partition
// whose destination holds records past its checkpoint is still walked
// and compared, and so is the last mirrored record of a partition that
// finds its topic's id not recorded (here cleared, as on rows from before
// ids were recorded): the id proves nothing of the records before until
// a partition was aligned against the topic, and only then is it
// recorded (a sibling that reads the row after that relies on it).
func TestScenarioCrashTakeoverTrustsTheDestinationEnd(t *testing.T) {
	t.Parallel()
	const topic, partitions = "ct", 6
	env := newEngineEnv(t, devcluster.Config{})
	const unrecorded = "cu"
	for _, tp := range []string{topic, unrecorded} {
		if err := env.Clusters.Source.CreateTopic(tp, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	src := workertest.Plain(env.Clusters.SourceAddr())
	for p := range int32(partitions) {
		workertest.ProduceRecords(t, src, seq(topic, p, "old", 20)...)
		workertest.ProduceRecords(t, src, seq(unrecorded, p, "old", 20)...)
	}
	env.CreateMirror("m", "ct|cu")
	a := env.StartInstance("a")
	workertest.WaitEndsEqual(t, env.Env, topic, partitions, 30*time.Second)
	workertest.WaitEndsEqual(t, env.Env, unrecorded, partitions, 30*time.Second)
	workertest.WaitFor(t, 20*time.Second, "every checkpoint saved at the destination's end", func() (bool, string) {
		ps := env.Partitions("m")
		var behind []string
		for _, p := range ps {
			if p.State != service.StateMirroring || p.DstNext == nil || *p.DstNext != 20 {
				behind = append(behind, describePartition(p))
			}
		}
		return len(ps) == 2*partitions && len(behind) == 0, fmt.Sprint(behind)
	})
	if _, err := env.Pool.Exec(context.Background(), `UPDATE mirror_topics SET source_topic_id = NULL WHERE topic = $1`, unrecorded); err != nil {
		t.Fatal(err)
	}

	a.Crash()
	// Partition 0's destination gets two records past its checkpoint, as
	// if a had copied them and crashed before it saved them: they are the
	// source's next two, so the new owner must walk and compare them.
	at := time.Now().Truncate(time.Millisecond)
	tail := func() []*kgo.Record {
		rs := seq(topic, 0, "tail", 2)
		for _, r := range rs {
			r.Timestamp = at
		}
		return rs
	}
	workertest.ProduceRecords(t, src, tail()...)
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.DestinationAddr()), tail()...)

	// Every fetch of the mirrored topic on the destination is a record
	// read back; the copy itself only produces there.
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Clusters.DestinationAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(context.Background(), topic, unrecorded)
	if err != nil || td.Error() != nil {
		t.Fatalf("destination topics: %v %v", err, td.Error())
	}
	var readBack, readBackUnrecorded [partitions]atomic.Int32
	counts := map[string]*[partitions]atomic.Int32{topic: &readBack, unrecorded: &readBackUnrecorded}
	byID := map[[16]byte]string{td[topic].ID: topic, td[unrecorded].ID: unrecorded}
	dst := env.Clusters.Destination
	dst.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		for _, ft := range kr.(*kmsg.FetchRequest).Topics {
			name := ft.Topic
			if name == "" {
				name = byID[ft.TopicID]
			}
			if c := counts[name]; c != nil {
				for _, fp := range ft.Partitions {
					if fp.Partition >= 0 && fp.Partition < partitions {
						c[fp.Partition].Add(1)
					}
				}
			}
		}
		return nil, nil, false
	})

	env.StartInstance("b")
	workertest.WaitFor(t, workertest.TTL+20*time.Second, "b owning and having re-aligned every partition", func() (bool, string) {
		var not []string
		for _, p := range env.Partitions("m") {
			if p.LeaseOwner != "b" || p.Realigning() {
				not = append(not, describePartition(p))
			}
		}
		return len(not) == 0, fmt.Sprint(not)
	})
	for p := range int32(partitions) {
		msg := lastOwnerEvent(t, env, topic, p)
		switch {
		case p == 0 && !strings.Contains(msg, "verified 2 record(s) written past the checkpoint"):
			t.Errorf("%s/%d: %q, want the two records past the checkpoint verified", topic, p, msg)
		case p > 0 && !strings.Contains(msg, "the destination ends at the checkpoint (offset 20)"):
			t.Errorf("%s/%d: %q, want the checkpoint proven by the destination's end", topic, p, msg)
		}
	}
	verified := 0
	for p := range int32(partitions) {
		msg := lastOwnerEvent(t, env, unrecorded, p)
		switch {
		case strings.HasSuffix(msg, "re-aligned: resuming at source offset 20"):
			verified++
			if n := readBackUnrecorded[p].Load(); n == 0 {
				t.Errorf("%s/%d: %q, but its last mirrored record was not read back on the destination", unrecorded, p, msg)
			}
		case !strings.Contains(msg, "the destination ends at the checkpoint (offset 20)"):
			t.Errorf("%s/%d: %q, want its last mirrored record verified or the id recorded by a sibling relied on", unrecorded, p, msg)
		}
	}
	if verified == 0 {
		t.Errorf("%s: no partition verified its last mirrored record, though the topic's id was not recorded when they were taken", unrecorded)
	}
	t.Logf("%s: %d of %d partitions found no id recorded and verified their last mirrored record", unrecorded, verified, partitions)
	if n := readBack[0].Load(); n == 0 {
		t.Errorf("%s/0: the destination was not read back, but it held records past the checkpoint", topic)
	}
	for p := 1; p < partitions; p++ {
		if n := readBack[p].Load(); n != 0 {
			t.Errorf("%s/%d: read back on the destination %d time(s) after the crash; its end proved the checkpoint", topic, p, n)
		}
	}

	// The copy goes on exact from there.
	for p := range int32(partitions) {
		workertest.ProduceRecords(t, src, seq(topic, p, "new", 5)...)
		workertest.ProduceRecords(t, src, seq(unrecorded, p, "new", 5)...)
	}
	for _, tp := range []string{topic, unrecorded} {
		workertest.WaitEndsEqual(t, env.Env, tp, partitions, 30*time.Second)
		workertest.AssertMirrored(t, env.Env, tp, partitions)
	}
}
