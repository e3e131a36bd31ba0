package partition

import (
	"context"
	"testing"

	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
)

// TestCopySettingsThrottleReachesRunningCopies: a limit set on a mirror
// whose partitions are already copying (a PATCH while it runs) paces them
// at once, at this instance's share of it; lifting the limit lets them go.
func TestCopySettingsThrottleReachesRunningCopies(t *testing.T) {
	c := newCopySettings()
	c.store(map[string]repo.MirrorCopyConfig{"m": {Partitions: 4}})
	c.copying("m", 1)
	c.copying("m", 1)
	if c.throttles["m"] != nil {
		t.Fatal("a throttle without a limit")
	}
	c.store(map[string]repo.MirrorCopyConfig{"m": {Partitions: 4, Config: map[string]string{service.CfgThrottledRate: "8000"}}})
	th := c.throttles["m"]
	if th == nil {
		t.Fatal("the limit set while copying made no throttle")
	}
	if got := th.Rate(); got != 4000 {
		t.Fatalf("rate %d, want this instance's share: 2 of 4 partitions of 8000", got)
	}
	c.store(map[string]repo.MirrorCopyConfig{"m": {Partitions: 4}})
	if c.throttles["m"] != nil {
		t.Fatal("the limit lifted, the throttle stayed")
	}
	if d, err := c.wait(context.Background(), nil, lease.Key{Mirror: "m", Topic: "t"}, func() int64 { return 1 << 30 }); d != 0 || err != nil {
		t.Fatalf("waited %v, %v without a limit", d, err)
	}
}
