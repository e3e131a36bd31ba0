package service

import (
	"slices"
	"testing"
)

// TestStoppedMirrorsOfNames: a mirror in the source's __mirror_state
// proves a continuation only if it copied this mirror's destination topic
// (its record names it, its own source topic) into this mirror's source
// topic (that name under its own topic.name.prefix).
func TestStoppedMirrorsOfNames(t *testing.T) {
	last := int64(9)
	rec := func(mirror, topic string, p int32) PartitionRecord {
		return PartitionRecord{Mirror: mirror, Topic: topic, Partition: p, State: StateStopped,
			LastMirroredSrc: &last, LastMirroredDst: &last}
	}
	unfinished := rec("plain", "payments", 0)
	unfinished.LastMirroredSrc, unfinished.LastMirroredDst = nil, nil
	snap := StateSnapshot{
		Mirrors: []MirrorRecord{
			{Name: "plain"},
			{Name: "prefixed", Config: map[string]string{CfgTopicNamePrefix: "a."}},
		},
		Partitions: []PartitionRecord{
			// plain copied orders into orders, and west.orders into west.orders.
			rec("plain", "orders", 0), rec("plain", "west.orders", 0),
			// prefixed copied orders into a.orders.
			rec("prefixed", "orders", 0),
			unfinished,
		},
	}
	cases := []struct {
		name               string
		srcTopic, dstTopic string
		partition          int32
		want               []string
	}{
		{"same names, no prefix", "orders", "orders", 0, []string{"plain"}},
		{"another partition", "orders", "orders", 1, nil},
		{"the reverse mirror's prefix names this source", "a.orders", "orders", 0, []string{"prefixed"}},
		// This mirror writes west.orders from orders; plain wrote west.orders
		// into a topic named west.orders, not orders.
		{"a record of this destination's name that wrote elsewhere", "orders", "west.orders", 0, nil},
		{"a prefixed source name no mirror wrote", "b.orders", "orders", 0, nil},
		{"no last mirrored offsets", "payments", "payments", 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, r := range StoppedMirrorsOf(snap, c.srcTopic, c.dstTopic, c.partition) {
				got = append(got, r.Mirror)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("StoppedMirrorsOf(%s ← %s/%d) = %v, want %v", c.srcTopic, c.dstTopic, c.partition, got, c.want)
			}
		})
	}
	if !MovedByAFailback(snap, "a.orders", "orders", 0, 20, 5) {
		t.Error("MovedByAFailback does not find prefixed's copy into a.orders")
	}
	if MovedByAFailback(snap, "orders", "west.orders", 0, 20, 5) {
		t.Error("MovedByAFailback takes plain's copy into west.orders for one into orders")
	}
}
