package service_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/service"
)

// TestInternalTopicsAreNeverMirrored: a source's internal topics, Kafka's,
// Confluent's and kmirror's own (a destination's __mirror_heartbeats, when
// the source was a kmirror destination), are never added, whatever the
// pattern: a pattern that matches only them is a 400 that names the rule
// and writes nothing (a dry run too), and a catch-all adds the rest.
func TestInternalTopicsAreNeverMirrored(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc, pool, bootstrap := newServiceOn(t, kfake.SeedTopics(2, "orders", "__mirror_heartbeats", "__mirror_state",
		"_confluent-metrics", "__consumer_offsets_copy", "_mirror_state", "confluent-audit"))
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m1",
		Source: service.SourceInput{BootstrapServers: bootstrap}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []service.AddTopicsInput{
		{Topic: "__mirror_heartbeats", Recreate: true},
		{Topic: "__.*|_confluent.*"},
		{Topic: "_confluent-metrics", DryRun: true},
	} {
		_, err := svc.AddTopics(ctx, "m1", in)
		var verr *service.ValidationError
		if !errors.As(err, &verr) || verr.Fields[0].Field != "topic" || !strings.Contains(verr.Fields[0].Message, "never mirrored") {
			t.Fatalf("add %+v: %v, want a 400 naming the rule", in, err)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM mirror_topics WHERE mirror = 'm1'`); n != 0 {
		t.Fatalf("%d topics written by refused adds", n)
	}
	res, err := svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: ".*"})
	if err != nil || !slices.Equal(res.Topics, []string{"_mirror_state", "confluent-audit", "orders"}) {
		t.Fatalf("add .*: %+v, %v; want every topic but the internal ones", res, err)
	}

	// Nor does a prefix make a destination name internal: with "_",
	// _mirror_state would be written to kmirror's __mirror_state.
	if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: "m2", Source: service.SourceInput{BootstrapServers: bootstrap},
		Config: map[string]string{"topic.name.prefix": "_"}}, service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"_mirror_state", "confluent-audit"} {
		_, err := svc.AddTopics(ctx, "m2", service.AddTopicsInput{Topic: topic, DryRun: true})
		var verr *service.ValidationError
		if !errors.As(err, &verr) || !strings.Contains(verr.Fields[0].Message, "would be written to _"+topic) ||
			!strings.Contains(verr.Fields[0].Message, "never mirrored") {
			t.Fatalf("add %s under the prefix _: %v, want a 400 naming the destination and the rule", topic, err)
		}
	}
	for name, want := range map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "__cluster_metadata": true,
		"__mirror_state": true, "__mirror_heartbeats": true, "_confluent-command": true, "orders": false, "_orders": false, "a__b": false} {
		if got := service.InternalTopic(name); got != want {
			t.Errorf("InternalTopic(%q) = %v", name, got)
		}
	}
}
