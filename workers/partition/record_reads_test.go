package partition

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kmirror/internal/kafka/kafkaconn"
)

// TestRecordReadsGroupTheirFetches: reads of many partitions asked at the
// same moment answer what kafkaconn.ReadRecords answers for each (from
// offset, up to n, below end), on one client whose fetches name many
// partitions each, not one fetch (and client) per read. A read of nothing
// answers nothing, and a caller whose context ends leaves at once.
func TestRecordReadsGroupTheirFetches(t *testing.T) {
	t.Parallel()
	const partitions, records = 16, 10
	cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(partitions, "ra", "rb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	conn := kafkaconn.Config{BootstrapServers: cluster.ListenAddrs()}
	cl, err := conn.NewClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for _, topic := range []string{"ra", "rb"} {
		for p := range int32(partitions) {
			for i := range records {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", topic, p, i)})
			}
		}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var fetches, fetched atomic.Int32 // fetch requests, and partitions they named
	cluster.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		fetches.Add(1)
		for _, ft := range kr.(*kmsg.FetchRequest).Topics {
			fetched.Add(int32(len(ft.Partitions)))
		}
		return nil, nil, false
	})

	// Each partition p is read from offset p%4, up to 3 records, below
	// offset 5 + p%3: sometimes n ends the read, sometimes end does.
	type read struct {
		topic     string
		p         int32
		from, end int64
		got       []*kgo.Record
		err       error
	}
	var all []*read
	for _, topic := range []string{"ra", "rb"} {
		for p := range int32(partitions) {
			all = append(all, &read{topic: topic, p: p, from: int64(p % 4), end: int64(5 + p%3)})
		}
	}
	const n = 3
	reads := newRecordReads()
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() { r.got, r.err = reads.read(ctx, "src/m", conn, true, nil, r.topic, r.p, r.from, r.end, n) })
	}
	wg.Wait()
	groupedFetches, groupedNamed := fetches.Load(), fetched.Load()
	for _, r := range all {
		if r.err != nil {
			t.Errorf("%s/%d: %v", r.topic, r.p, r.err)
			continue
		}
		alone, err := kafkaconn.ReadRecords(ctx, conn, r.topic, r.p, r.from, r.end, n, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.got) != len(alone) || len(r.got) != int(min(n, r.end-r.from)) {
			t.Errorf("%s/%d [%d, %d) n %d: %d records grouped, %d alone", r.topic, r.p, r.from, r.end, n, len(r.got), len(alone))
			continue
		}
		for i := range r.got {
			if g, a := r.got[i], alone[i]; g.Offset != a.Offset || string(g.Value) != string(a.Value) ||
				string(g.Value) != fmt.Sprintf("%s-%d-%d", r.topic, r.p, r.from+int64(i)) {
				t.Errorf("%s/%d record %d: grouped %d %q, alone %d %q", r.topic, r.p, i, g.Offset, g.Value, a.Offset, a.Value)
			}
		}
	}
	// Alone, each read is a client of its own whose fetches name its one
	// partition; grouped, fetches name many.
	if groupedFetches == 0 || groupedFetches >= int32(len(all)) || groupedNamed < 4*groupedFetches {
		t.Errorf("%d grouped reads made %d fetch requests naming %d partitions: want fewer requests than reads, naming 4 or more partitions each on average",
			len(all), groupedFetches, groupedNamed)
	}
	t.Logf("%d grouped reads: %d fetch requests naming %d partitions", len(all), groupedFetches, groupedNamed)

	if got, err := reads.read(ctx, "src/m", conn, true, nil, "ra", 0, 5, 5, 3); err != nil || got != nil {
		t.Errorf("empty range: %v, %v", got, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	if _, err := reads.read(gone, "src/m", conn, true, nil, "ra", 1, 0, 5, 3); err == nil {
		t.Error("a read whose context ended answered no error")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a read whose context ended took %s", d)
	}
}
