package api_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"kmirror/api"
)

// TestTopicsWaitRefusesBadWait: a wait that is not a duration, negative or
// over 5m is a 400 naming wait, and nothing changes.
func TestTopicsWaitRefusesBadWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	e.topicsAction(t, "m1", "add", "payments")
	before := e.snapshot(t)
	for _, action := range []string{"add", "pause", "resume", "remove"} {
		for _, wait := range []string{"soon", "30", "-1s", "5m1s", "1h", ""} {
			wantProblem(t, e.do(t, "POST", "/v1/mirrors/m1/topics:"+action+"?wait="+wait, map[string]any{"topic": "orders|payments"}),
				http.StatusBadRequest, "validation", "wait")
		}
	}
	e.unchanged(t, before)
}

// TestTopicsWaitExpires: with no worker moving the partitions, the wait
// runs out and answers 200 with the current counts and completed false;
// the action itself is done.
func TestTopicsWaitExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	start := time.Now()
	var res api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?wait=400ms", map[string]any{"topic": "orders|payments"}), http.StatusOK, &res)
	if took := time.Since(start); took < 400*time.Millisecond || took > 10*time.Second {
		t.Fatalf("the call took %s, want about 400ms", took)
	}
	want := []api.TopicWaitProgress{
		{Topic: "orders", TargetState: "MIRRORING", Ready: 0, Total: 3},
		{Topic: "payments", TargetState: "MIRRORING", Ready: 0, Total: 1},
	}
	if res.Wait == nil || res.Wait.Completed || res.Wait.WaitedMs < 400 || !reflect.DeepEqual(res.Wait.Topics, want) {
		t.Fatalf("wait %+v, want not completed after >= 400ms with %+v", res.Wait, want)
	}
	if got := e.desiredState(t, "m1", "orders"); got != "mirroring" {
		t.Fatalf("desired state %s after the add", got)
	}
	// Without ?wait the answer has no wait; a dry run does not wait.
	var plain api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause", map[string]any{"topic": "orders"}), http.StatusOK, &plain)
	if plain.Wait != nil {
		t.Fatalf("wait %+v without ?wait", plain.Wait)
	}
}

// TestTopicsWaitReturnsWhenReady: the call returns as soon as every
// partition is in the target state (here set as a worker would), long
// before the wait runs out; a FAILED partition ends the wait too, with
// completed false.
func TestTopicsWaitReturnsWhenReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createMirror(t, "m1")
	setStates := func(state string, after time.Duration) {
		go func() {
			time.Sleep(after)
			if _, err := e.pool.Exec(context.Background(), `UPDATE mirror_partitions SET state = $1
				WHERE mirror = 'm1' AND topic = 'orders'`, state); err != nil {
				t.Errorf("set states: %v", err)
			}
		}()
	}
	setStates("MIRRORING", 300*time.Millisecond)
	start := time.Now()
	var res api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?wait=1m", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the call took %s", took)
	}
	want := []api.TopicWaitProgress{{Topic: "orders", TargetState: "MIRRORING", Ready: 3, Total: 3}}
	if res.Wait == nil || !res.Wait.Completed || !reflect.DeepEqual(res.Wait.Topics, want) {
		t.Fatalf("wait %+v, want completed with %+v", res.Wait, want)
	}

	setStates("FAILED", 300*time.Millisecond)
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause?wait=1m", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	want = []api.TopicWaitProgress{{Topic: "orders", TargetState: "PAUSED", Failed: 3, Total: 3}}
	if res.Wait == nil || res.Wait.Completed || !reflect.DeepEqual(res.Wait.Topics, want) {
		t.Fatalf("wait %+v, want ended, not completed, with %+v", res.Wait, want)
	}
}
