package metadatasync_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/devenv/devcluster"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// TestSyncGroupOffsetsClampedToLogStart: a group's translated offset below
// the destination partition's log start (its records were deleted there)
// is committed as the log start, and the group's result says so, on every
// pass while it lasts. The other partition is synced as translated. (A
// translated offset above the destination's end cannot be set up here: the
// translation stops at the checkpoint's dst_next, which the destination
// holds; clampOffset's table test covers that bound.)
func TestSyncGroupOffsetsClampedToLogStart(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Produce(t, env.Clusters.SourceAddr(), "orders", 2, 20, kgo.NoCompression())
	env.startSyncNode("i1", workertest.InstanceOpts{})
	env.syncCreateMirror("m1", "orders", service.SourceInput{}, nil)
	workertest.WaitMirrored(t, env.Env, "orders", 2, 30*time.Second)
	env.syncWaitCheckpointed("m1", "orders", 10*time.Second)

	// app has consumed 5 records of each partition: offset 5 on the source,
	// and on the destination, which started empty.
	srcConn, dstConn := workertest.Plain(env.Clusters.SourceAddr()), workertest.Plain(env.Clusters.DestinationAddr())
	consumeAndCommit(t, srcConn, "app", "orders", 2, 5, false)
	dst := syncAdmin(t, dstConn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The destination drops records 0-11 of orders/0: its log start is 12.
	deleted, err := dst.DeleteRecords(ctx, kadm.OffsetsList{{Topic: "orders", Partition: 0, At: 12, LeaderEpoch: -1}}.Offsets())
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("delete records of orders/0 on the destination: %v", err)
	}

	wantClamped := []service.ClampedPartition{{Topic: "orders", Partition: 0, TranslatedOffset: 5, CommittedOffset: 12,
		Reason: "below the destination's log start 12 (retention or a deletion removed the records before it): committed 12"}}
	res := env.syncNow("m1")
	mustOK(t, res)
	app := findGroup(t, res.GroupOffsets, "app")
	if app.SyncedPartitions != 2 || app.Committed != 2 || len(app.Skipped) != 0 || app.Error != "" ||
		!slices.Equal(app.Clamped, wantClamped) {
		t.Fatalf("group app: %+v, want clamped %+v", app, wantClamped)
	}
	committed, err := dst.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 12, 1: 5} {
		if o, ok := committed.Lookup("orders", p); !ok || o.Err != nil || o.At != want {
			t.Fatalf("app's destination offset of orders/%d: %+v (listed %v), want %d", p, o, ok, want)
		}
	}

	// A consumer of app on the destination reads what it still holds.
	got := consumeToEnd(t, dstConn, "app", "orders", 2)
	for p, first := range map[int32]int64{0: 12, 1: 5} {
		if len(got[p]) != 20-int(first) || got[p][0].Offset != first {
			t.Fatalf("orders/%d: the destination consumer read %d records from %v, want %d from %d",
				p, len(got[p]), firstOffset(got[p]), 20-first, first)
		}
	}

	// In step: nothing to commit, and the clamp is still reported.
	res = env.syncNow("m1")
	mustOK(t, res)
	if app := findGroup(t, res.GroupOffsets, "app"); app.Committed != 0 || app.SyncedPartitions != 2 ||
		!slices.Equal(app.Clamped, wantClamped) {
		t.Fatalf("second pass, group app: %+v, want clamped %+v", app, wantClamped)
	}
}

func firstOffset(rs []*kgo.Record) string {
	if len(rs) == 0 {
		return "none"
	}
	return fmt.Sprint(rs[0].Offset)
}
