package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/api"
	"kmirror/internal/testing/testdb"
	"kmirror/service"
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
	// A dry run starts nothing, so it does not wait.
	start := time.Now()
	var dry api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:add?dry_run=true&wait=30s", map[string]any{"topic": "orders"}), http.StatusOK, &dry)
	if dry.Wait != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("dry run with wait: %+v after %s", dry, time.Since(start))
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
		{Topic: "orders", DestinationTopic: "orders", TargetState: "MIRRORING", Ready: 0, Total: 3},
		{Topic: "payments", DestinationTopic: "payments", TargetState: "MIRRORING", Ready: 0, Total: 1},
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
	want := []api.TopicWaitProgress{{Topic: "orders", DestinationTopic: "orders", TargetState: "MIRRORING", Ready: 3, Total: 3}}
	if res.Wait == nil || !res.Wait.Completed || !reflect.DeepEqual(res.Wait.Topics, want) {
		t.Fatalf("wait %+v, want completed with %+v", res.Wait, want)
	}

	setStates("FAILED", 300*time.Millisecond)
	ok(t, e.do(t, "POST", "/v1/mirrors/m1/topics:pause?wait=1m", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	want = []api.TopicWaitProgress{{Topic: "orders", DestinationTopic: "orders", TargetState: "PAUSED", Failed: 3, Total: 3}}
	if res.Wait == nil || res.Wait.Completed || !reflect.DeepEqual(res.Wait.Topics, want) {
		t.Fatalf("wait %+v, want ended, not completed, with %+v", res.Wait, want)
	}
}

// TestTopicsWaitOutlastsRequestTimeout: the wait is added to the request
// deadline, so a server whose requests time out after 200ms still waits the
// full second it was asked to and answers 200.
func TestTopicsWaitOutlastsRequestTimeout(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	kafka, err := kfake.NewCluster(kfake.SeedTopics(1, "payments"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	svc, err := service.NewControl(service.Config{Pool: pool, Catalog: service.KafkaCatalog(2 * time.Second),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.NewHandler(api.Config{Service: svc, Pool: pool, Logger: slog.New(slog.DiscardHandler),
		RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(path, body string) (int, []byte) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.Bytes()
	}
	// Created through the service: a create checks the source and writes
	// the mirror, which on a loaded machine can outlast the 200ms itself.
	if _, err := svc.CreateMirror(t.Context(), service.MirrorInput{Name: "m1",
		Source: service.SourceInput{BootstrapServers: strings.Join(kafka.ListenAddrs(), ",")}}, service.WriteOpts{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	status, body := post("/v1/mirrors/m1/topics:add?wait=1s", `{"topic":"payments"}`)
	var res api.TopicsResult
	if status != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Wait == nil || res.Wait.Completed || res.Wait.WaitedMs < 1000 {
		t.Fatalf("add?wait=1s with a 200ms request timeout: %d %s", status, body)
	}
}
