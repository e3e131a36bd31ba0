package partition

import (
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after 10 s with what
// and cond's last state. (workertest.WaitFor does the same for the external
// tests; this package's own tests cannot import workertest.)
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after 10s", what, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
