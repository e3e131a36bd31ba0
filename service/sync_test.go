package service

import (
	"testing"
	"time"
)

func TestSyncConfigPropertyExcluded(t *testing.T) {
	def, err := ParseSyncConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	custom, err := ParseSyncConfig(map[string]string{CfgTopicPropertiesExclude: "retention.*, segment.bytes"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cfg  SyncConfig
		name string
		want bool
	}{
		{def, "min.insync.replicas", true},
		{def, "unclean.leader.election.enable", true},
		{def, "leader.replication.throttled.replicas", true},
		{def, "follower.replication.throttled.replicas", true},
		{def, "message.timestamp.type", true}, // prefix entry
		{def, "message.timestamp.difference.max.ms", true},
		{def, "message.downconversion.enable", false},
		{def, "retention.ms", false},
		{def, "cleanup.policy", false},
		{custom, "retention.ms", true},
		{custom, "retention.bytes", true},
		{custom, "segment.bytes", true},
		{custom, "segment.ms", false},
		{custom, "min.insync.replicas", false}, // the custom list replaces the default
	}
	for _, c := range cases {
		if got := c.cfg.PropertyExcluded(c.name); got != c.want {
			t.Errorf("%v excludes %s = %v, want %v", c.cfg.PropertiesExclude, c.name, got, c.want)
		}
	}
}

func TestParseSyncConfig(t *testing.T) {
	def, err := ParseSyncConfig(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if def.Interval != 0 || def.TopicsInclude != nil || def.GroupsExclude != nil {
		t.Fatalf("defaults: %+v", def)
	}
	for name, want := range map[string]bool{"__consumer_offsets": true, "__x": true, "orders": false} {
		if got := Matches(def.TopicsExclude, name); got != want {
			t.Errorf("default topics.exclude matches %s = %v", name, got)
		}
	}
	if !Matches(def.GroupsInclude, "any-group") || !Matches(def.ACLsInclude, "any") {
		t.Fatal("groups.include and acls.include default to everything")
	}
	c, err := ParseSyncConfig(map[string]string{CfgMetadataRefreshIntervalMs: "1500", CfgTopicsInclude: "orders|pay.*",
		CfgTopicsExclude: ""})
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != 1500*time.Millisecond {
		t.Fatalf("interval %s", c.Interval)
	}
	// Whole-name matches only; an empty exclude excludes nothing.
	for name, want := range map[string]bool{"orders": true, "payments": true, "orders-eu": false, "__x": false} {
		if got := Matches(c.TopicsInclude, name) && !Matches(c.TopicsExclude, name); got != want {
			t.Errorf("%s added = %v, want %v", name, got, want)
		}
	}
}
