package kafkaconn

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDynamicTopicConfigs(t *testing.T) {
	v := func(s string) *string { return &s }
	rc := kadm.ResourceConfig{Configs: []kadm.Config{
		{Key: "retention.ms", Value: v("1000"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "cleanup.policy", Value: v("compact"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "min.insync.replicas", Value: v("2"), Source: kmsg.ConfigSourceDynamicTopicConfig},  // excluded
		{Key: "segment.bytes", Value: v("1"), Source: kmsg.ConfigSourceDefaultConfig},             // a default
		{Key: "secret", Value: nil, Source: kmsg.ConfigSourceDynamicTopicConfig, Sensitive: true}, // never returned
	}}
	got := DynamicTopicConfigs(rc, func(name string) bool { return name == "min.insync.replicas" })
	want := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
