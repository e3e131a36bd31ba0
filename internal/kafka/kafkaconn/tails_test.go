package kafkaconn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLastCommittedRecord: the last committed record is found behind a
// commit marker and behind an aborted transaction longer than the first
// window, never below from, and not at all in a range of only aborted
// records and markers.
func TestLastCommittedRecord(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.SeedTopics(1, "t"))
	conn := Config{BootstrapServers: c.ListenAddrs()}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	// 0-1 plain, 2-3 committed (marker 4), 5-24 aborted (marker 25).
	produce := func(txn string, commit bool, values ...string) {
		t.Helper()
		opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
		if txn != "" {
			opts = append(opts, kgo.TransactionalID(txn))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if txn != "" {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if txn != "" {
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("", false, "a", "b")
	produce("x", true, "c", "d")
	aborted := make([]string, 20)
	for i := range aborted {
		aborted[i] = "aborted"
	}
	produce("y", false, aborted...)

	ends, err := ListCommittedEnds(ctx, conn, []string{"t"}, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := ends.Lookup("t", 0)
	if !ok || end.Err != nil || end.Offset != 26 {
		t.Fatalf("end %+v (listed %v), want 26", end, ok)
	}
	for _, tc := range []struct {
		from int64
		want string // "" for none
	}{
		{0, "d"},
		{3, "d"},
		{4, ""},
		{20, ""},
	} {
		r, err := LastCommittedRecord(ctx, conn, "t", 0, tc.from, 26, testTimeout)
		if err != nil {
			t.Fatalf("from %d: %v", tc.from, err)
		}
		got := ""
		if r != nil {
			got = string(r.Value)
		}
		if got != tc.want {
			t.Errorf("from %d: last committed record %q, want %q", tc.from, got, tc.want)
		}
	}

	// The first committed record: at from, past a marker, never an
	// aborted one.
	for _, tc := range []struct {
		from int64
		want string // "" for none
	}{
		{0, "a"},
		{2, "c"},
		{4, ""},
		{20, ""},
	} {
		r, err := FirstCommittedRecord(ctx, conn, "t", 0, tc.from, 26, testTimeout)
		if err != nil {
			t.Fatalf("first from %d: %v", tc.from, err)
		}
		got := ""
		if r != nil {
			got = string(r.Value)
		}
		if got != tc.want {
			t.Errorf("from %d: first committed record %q, want %q", tc.from, got, tc.want)
		}
	}

	// ReadCommittedTail counts the data records: markers and aborted
	// records are not counted.
	for _, tc := range []struct {
		from    int64
		records int64
		first   string
		last    string
	}{
		{0, 4, "a", "d"},
		{3, 1, "d", "d"},
		{4, 0, "", ""},
		{20, 0, "", ""},
	} {
		tail, err := ReadCommittedTail(ctx, conn, "t", 0, tc.from, 26, testTimeout)
		if err != nil {
			t.Fatalf("tail from %d: %v", tc.from, err)
		}
		first, last := "", ""
		if tail.First != nil {
			first = string(tail.First.Value)
		}
		if tail.Last != nil {
			last = string(tail.Last.Value)
		}
		if !tail.Counted || tail.Records != tc.records || first != tc.first || last != tc.last {
			t.Errorf("tail from %d: %d record(s) (counted %v), first %q, last %q; want %d, %q, %q",
				tc.from, tail.Records, tail.Counted, first, last, tc.records, tc.first, tc.last)
		}
	}
	// A range longer than the last window is not read whole, so not
	// counted; its first and last records are still found.
	long := make([]string, 600)
	for i := range long {
		long[i] = "plain"
	}
	long[len(long)-1] = "last"
	produce("", false, long...)
	tail, err := ReadCommittedTail(ctx, conn, "t", 0, 0, 626, testTimeout)
	if err != nil || tail.Counted || tail.Last == nil || string(tail.Last.Value) != "last" ||
		tail.First == nil || string(tail.First.Value) != "a" {
		t.Fatalf("tail of 626 offsets: %+v, %v; want the first and last records, not counted", tail, err)
	}
}
