package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"kmirror/repo"
)

// MaxWait bounds how long a topic action may wait for its partitions.
const MaxWait = 5 * time.Minute

// waitPoll is how often a wait re-reads the partition states when no
// notification woke it (the notifier is down, or there is none).
const waitPoll = 300 * time.Millisecond

// waitMinInterval spaces a wait's reads however often notifications come:
// thousands of partitions changing state would otherwise have each waiter
// re-read the counts back to back.
const waitMinInterval = 50 * time.Millisecond

// ParseWait parses a topic action's wait, a Go duration from 0 to MaxWait.
// A bad or over-limit value is a *ValidationError naming field.
func ParseWait(field, raw string) (time.Duration, error) {
	d, err := time.ParseDuration(raw)
	if err != nil {
		return 0, &ValidationError{Fields: []FieldError{{Field: field,
			Message: fmt.Sprintf("%q is not a duration (e.g. 30s, 2m)", raw)}}}
	}
	if d < 0 || d > MaxWait {
		return 0, &ValidationError{Fields: []FieldError{{Field: field,
			Message: fmt.Sprintf("%s is out of range [0s, %s]", d, MaxWait)}}}
	}
	return d, nil
}

// TargetState is the partition state that a topic action moves the
// partitions of its topics to.
func TargetState(action string) PartitionState {
	switch action {
	case "add", "resume":
		return StateMirroring
	case "pause":
		return StatePaused
	case "remove":
		return StateStopped
	}
	return StateUnknown
}

// TopicWait is one topic's progress towards its action's target state.
type TopicWait struct {
	Topic string
	// DestinationTopic is the topic's destination name.
	DestinationTopic string
	Target           PartitionState
	// Ready partitions are in the target state, Failed ones FAILED, of Total.
	Ready, Failed, Total int
}

// WaitResult is the outcome of waiting for a topic action's partitions.
type WaitResult struct {
	// Completed: every partition reached the target state in time.
	Completed bool
	Waited    time.Duration
	Topics    []TopicWait
}

// failedEndsWait says whether a FAILED partition ends a wait for target. It
// does for MIRRORING and PAUSED: an operator or a backoff must resolve it,
// and waiting on would only hang. It does not for STOPPED: a removed FAILED
// partition goes on to STOPPED (FAILED → PREPARING → STOPPING → STOPPED)
// with no one's help, so a remove's wait that ended there would report a
// failure for a remove that succeeds a moment later.
func failedEndsWait(target PartitionState) bool {
	return target != StateStopped
}

// settled says whether the wait can end: every partition is in the target
// state, or FAILED where that ends the wait (failedEndsWait).
func (r WaitResult) settled() bool {
	for _, t := range r.Topics {
		done := t.Ready
		if failedEndsWait(t.Target) {
			done += t.Failed
		}
		if done < t.Total {
			return false
		}
	}
	return true
}

// WaitForTopics waits up to d for every partition of the result's topics to
// reach the action's target state, re-reading the states when the notifier
// reports a state change (every one writes an outbox row, and the outbox
// NOTIFYs) and every waitPoll otherwise. It
// returns early when all partitions are in the target state or FAILED
// (but for a remove: failedEndsWait), and when ctx ends; running out of
// time is not an error: the result then holds the current states with
// Completed false.
func (s *Control) WaitForTopics(ctx context.Context, res TopicsResult, d time.Duration) (WaitResult, error) {
	sub := s.notes.Subscribe(repo.ChannelOutbox) // nil without a notifier: never fires
	defer sub.Unsubscribe()
	return s.waitForTopics(ctx, res, d, sub.C())
}

// waitForTopics is WaitForTopics woken by wake.
func (s *Control) waitForTopics(ctx context.Context, res TopicsResult, d time.Duration, wake <-chan struct{}) (WaitResult, error) {
	start := time.Now()
	target := TargetState(res.Action)
	timer := time.NewTimer(d)
	defer timer.Stop()
	poll := time.NewTicker(waitPoll)
	defer poll.Stop()
	// Destination names never change: read once.
	dests, err := repo.TopicsDestNames(ctx, s.pool, res.Mirror)
	if err != nil {
		return WaitResult{}, err
	}
	var last WaitResult
	for {
		cur, err := s.topicProgress(ctx, res.Mirror, res.Topics, dests, target)
		switch {
		case err == nil:
			last = cur
		case last.Topics != nil && (ctx.Err() != nil || errors.Is(err, ErrDatabaseUnavailable)):
			// An outage or a failover: the wait goes on, and answers with
			// the states last read if the database is not back in time.
		default:
			return WaitResult{}, err
		}
		last.Waited = time.Since(start)
		if err == nil && last.settled() {
			last.Completed = true
			for _, t := range last.Topics {
				if t.Ready < t.Total {
					last.Completed = false
				}
			}
			return last, nil
		}
		// Out of time: this read was the last. Checked here, not only by
		// the timer below, because select picks at random among ready
		// cases: with ?wait=0s a pending wake-up could win and the answer
		// come 50 ms late, holding states the caller did not wait for.
		if last.Waited >= d {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, nil
		case <-timer.C:
			// One last read, so the answer holds the states at expiry.
			if cur, err := s.topicProgress(ctx, res.Mirror, res.Topics, dests, target); err == nil {
				last = cur
			}
			last.Waited = time.Since(start)
			last.Completed = false
			return last, nil
		case <-wake:
			// Let a burst of changes land before reading again.
			select {
			case <-ctx.Done():
			case <-time.After(waitMinInterval):
			}
		case <-poll.C:
		}
	}
}

// topicProgress counts the topics' partitions in the target state; dests
// names their destination topics.
func (s *Control) topicProgress(ctx context.Context, mirror string, topics []string, dests map[string]string, target PartitionState) (WaitResult, error) {
	counts, err := repo.TopicsStateCounts(ctx, s.pool, mirror)
	if err != nil {
		return WaitResult{}, err
	}
	idx := make(map[string]int, len(topics))
	out := WaitResult{Topics: make([]TopicWait, len(topics))}
	for i, name := range topics {
		idx[name] = i
		out.Topics[i] = TopicWait{Topic: name, DestinationTopic: cmp.Or(dests[name], name), Target: target}
	}
	for _, c := range counts {
		i, ok := idx[c.Topic]
		if !ok {
			continue
		}
		t := &out.Topics[i]
		t.Total += c.Partitions
		switch c.State {
		case target:
			t.Ready += c.Partitions
		case StateFailed:
			t.Failed += c.Partitions
		}
	}
	return out, nil
}
