package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"kmirror/openapi/client"
)

func TestWriteLastSync(t *testing.T) {
	ok := client.SyncOutcome{Ok: true}
	bad := client.SyncOutcome{Ok: false, Error: ptr("cannot reach Kafka at 127.0.0.1:1 within 5s")}
	r := &client.SyncResult{StartedAt: time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC), DurationMs: 42,
		Trigger: client.SyncResultTriggerInterval, TopicConfigs: bad, Partitions: ok, NewTopics: ok,
		DeletedTopics: ok, Acls: ok, PausedTopics: ok, GroupOffsets: client.GroupOffsetsOutcome{Ok: true}}
	var b bytes.Buffer
	writeLastSync(&b, "m1", r)
	got := b.String()
	if !strings.HasPrefix(got, "Last sync of m1: ") {
		t.Errorf("--sync's output starts with %q, want the line itself (no blank line first)", got)
	}
	for _, want := range []string{
		"Last sync of m1: 2026-12-02T13:00:00Z (42 ms, interval)",
		"  topic configs: ERROR cannot reach Kafka at 127.0.0.1:1 within 5s\n",
		"  partitions: ok\n", "  group offsets: ok\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
