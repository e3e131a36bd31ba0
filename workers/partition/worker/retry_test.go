package worker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"kmirror/repo"
	"kmirror/service"
)

// Failures (worker.go's fail, step's FAILED case): retryable ones back off
// and try again, keeping their attempt count until mirroring makes
// progress; a poke ends the wait; the database not answering is no
// failure at all.

// TestRetryableFailureRetriesUntilItMirrors: a source that cannot be
// reached fails the partition retryably, with a next retry; it is retried
// with backoff, counting attempts, and once the source answers the
// partition mirrors; its first verified progress resets the count.
func TestRetryableFailureRetriesUntilItMirrors(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 4)
	h.src.sourceFault = errors.New("source unreachable")
	h.addRow(0, nil)
	w := h.start(0)
	r := h.db.waitRow(t, pid(0), "FAILED at attempt 2", func(r repo.Partition) bool {
		return r.State == service.StateFailed && r.RetryAttempt >= 2
	})
	if !r.Retryable || r.NextRetryAt == nil {
		t.Fatalf("FAILED retryable %v, next retry %v; want retried", r.Retryable, r.NextRetryAt)
	}
	wantContains(t, "error", r.Error, "source: source unreachable")
	h.src.with(func(s *fakeSource) { s.sourceFault = nil })
	r = h.db.waitState(t, pid(0), service.StateMirroring)
	if r.RetryAttempt < 2 {
		t.Fatalf("MIRRORING with attempt %d; want the count kept until progress", r.RetryAttempt)
	}
	if r.Error != "" {
		t.Fatalf("MIRRORING keeps the error %q", r.Error)
	}
	var retried bool
	ts, _, _ := h.db.log()
	for _, tr := range ts {
		if tr.From == service.StateFailed && tr.To == service.StatePreparing && tr.Reason == "retry 1" {
			retried = true
			wantContains(t, "a retry's error", tr.Error, "source unreachable") // the row says why while it retries
		}
	}
	if !retried {
		t.Fatalf("no \"retry 1\" in %s", describeTransitions(ts))
	}
	h.waitDestination(0, 4)
	w.w.Stop() // saves the session's progress
	if r := h.db.row(pid(0)); r.RetryAttempt != 0 {
		t.Fatalf("attempt %d after verified progress; want 0", r.RetryAttempt)
	}
}

// TestPokeEndsTheRetryWait: a FAILED partition waiting hours for its next
// retry tries again at once when poked (the destination watch found what
// failed it repaired).
func TestPokeEndsTheRetryWait(t *testing.T) {
	h := newHarness(t, 1)
	h.cfg.Retry = RetryPolicy{Initial: 1000 * time.Hour, Max: 1000 * time.Hour, MaxAttempts: 100}
	h.src.produce(0, 4)
	h.dst.offsetsErr = errors.New("destination unreachable")
	h.dst.createTopic(hDest, 1)
	h.checkpointed(0, service.StateStopped, 0, 0)
	h.start(0)
	r := h.waitFailed(0, true, "list destination offsets: destination unreachable")
	if time.Until(*r.NextRetryAt) < 10*time.Second {
		t.Skipf("the backoff's jitter drew a retry in %s: nothing to cut short", time.Until(*r.NextRetryAt))
	}
	h.dst.mu.Lock()
	h.dst.offsetsErr = nil
	h.dst.mu.Unlock()
	h.pokes <- struct{}{}
	h.db.waitState(t, pid(0), service.StateMirroring)
	h.waitDestination(0, 4)
}

// TestPermanentFailureWaitsForAnOperator: a permanent failure is not
// retried, and a poke does not retry it either; removing the topic takes
// it to STOPPED through PREPARING and STOPPING.
func TestPermanentFailureWaitsForAnOperator(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 4)
	h.dst.createTopic(hDest, 1)
	h.dst.append(hDest, 0, rec(99))
	h.addRow(0, nil)
	h.start(0)
	h.waitFailed(0, false, "already holds records")
	h.pokes <- struct{}{} // not taken by an idle worker
	h.db.setDesire(hMirror, hTopic, func(d *Desire) { d.State = service.DesiredStopped })
	h.db.waitState(t, pid(0), service.StateStopped)
	ts, _, _ := h.db.log()
	want := "[UNKNOWN→PREPARING \"\"][PREPARING→FAILED"
	if got := describeTransitions(ts); got[:len(want)] != want || len(ts) != 5 ||
		ts[2].Reason != "topic removed while FAILED" || ts[3].To != service.StateStopping {
		t.Fatalf("transitions %s; want FAILED → PREPARING (topic removed) → STOPPING → STOPPED, no retry", got)
	}
}

// TestDatabaseOutageIsNoFailure: a state change the database does not
// answer is tried again after a pause, without FAILED.
func TestDatabaseOutageIsNoFailure(t *testing.T) {
	h := newHarness(t, 1)
	h.src.produce(0, 2)
	h.addRow(0, nil)
	failed := false
	h.db.transitionFault = func(t service.PartitionTransition) error {
		if t.To == service.StateMirroring && !failed {
			failed = true
			return fmt.Errorf("write: %w", service.ErrDatabaseUnavailable)
		}
		return nil
	}
	h.start(0)
	h.db.waitState(t, pid(0), service.StateMirroring)
	ts, _, _ := h.db.log()
	if !failed || len(ts) != 2 {
		t.Fatalf("outage injected %v, transitions %s; want UNKNOWN → PREPARING → MIRRORING only", failed, describeTransitions(ts))
	}
	h.waitDestination(0, 2)
}
