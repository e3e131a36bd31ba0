package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"kmirror/openapi/client"
)

// waitPoll is how often --wait reads the mirror's topics for progress.
const waitPoll = 500 * time.Millisecond

// maxCLIWait bounds --wait, as the server bounds ?wait.
const maxCLIWait = 5 * time.Minute

// waitIncompleteError is a --wait that ended before every partition reached
// the target state: the time ran out or partitions went FAILED. The action
// itself was done. Exit status 3.
type waitIncompleteError struct{ msg string }

func (e *waitIncompleteError) Error() string { return e.msg }

// targetState is the partition state an action moves its topics to.
func targetState(action string) client.PartitionState {
	switch action {
	case "pause":
		return client.PartitionStatePaused
	case "remove":
		return client.PartitionStateStopped
	}
	return client.PartitionStateMirroring // add, resume
}

// failedEndsWait says whether FAILED partitions end a wait for target, as
// the server's ?wait decides: not for a remove, whose FAILED partitions go
// on to STOPPED by themselves (FAILED → PREPARING → STOPPING → STOPPED), so
// stopping there would report a failure for a remove that succeeds.
func failedEndsWait(target client.PartitionState) bool {
	return target != client.PartitionStateStopped
}

// topicProgress is one topic's partitions in the target state, FAILED, and
// in all.
type topicProgress struct{ ready, failed, total int }

func stateCount(c client.PartitionStateCounts, s client.PartitionState) int {
	switch s {
	case client.PartitionStateMirroring:
		return val(c.MIRRORING)
	case client.PartitionStatePaused:
		return val(c.PAUSED)
	case client.PartitionStateStopped:
		return val(c.STOPPED)
	case client.PartitionStateFailed:
		return val(c.FAILED)
	}
	return 0
}

// waitForTopics follows the topics an action applied to until every
// partition is in the action's target state, some are FAILED (which needs
// an operator or a retry, so waiting on would only hang; except for a
// remove: failedEndsWait) or --wait runs out. It reads the mirror's topic list every waitPoll and prints a line
// per topic whenever its count changes: "orders: 2/3 partitions MIRRORING".
func (c *mirrorsCLI) waitForTopics(ctx context.Context, topics []string) error {
	target := targetState(c.opts.action)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.opts.wait)
	defer cancel()
	last := map[string]topicProgress{}
	dests := map[string]string{} // source name → destination name
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		resp, err := c.api.ListTopicsWithResponse(ctx, c.opts.mirror)
		if ctx.Err() != nil {
			break
		}
		if err := c.check(resp, err, http.StatusOK); err != nil {
			return err
		}
		if resp.JSON200 == nil {
			return c.unexpected(resp)
		}
		now := map[string]topicProgress{}
		for _, t := range resp.JSON200.Topics {
			now[t.Topic] = topicProgress{ready: stateCount(t.States, target),
				failed: stateCount(t.States, client.PartitionStateFailed), total: t.Partitions}
			dests[t.Topic] = t.DestinationTopic
		}
		settled, done := true, true
		for _, name := range topics {
			p := now[name]
			if prev, seen := last[name]; !seen || prev != p {
				line := fmt.Sprintf("%s: %d/%d partitions %s", topicName(name, dests[name]), p.ready, p.total, target)
				if p.failed > 0 {
					line += fmt.Sprintf(", %d FAILED", p.failed)
				}
				fmt.Fprintln(c.stdout, line)
			}
			ended := p.ready
			if failedEndsWait(target) {
				ended += p.failed
			}
			if ended < p.total {
				settled = false
			}
			if p.ready < p.total {
				done = false
			}
		}
		last = now
		if settled {
			if done {
				fmt.Fprintf(c.stdout, "All partitions are %s (after %s).\n", target, time.Since(start).Round(100*time.Millisecond))
				return nil
			}
			return &waitIncompleteError{fmt.Sprintf("some partitions are FAILED; see kmirror mirrors --describe --mirror %s --failed", c.opts.mirror)}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	var behind []string
	for _, name := range topics {
		if p, seen := last[name]; !seen {
			behind = append(behind, name+" not read yet") // the wait ran out before the first answer
		} else if p.ready < p.total {
			behind = append(behind, fmt.Sprintf("%s %d/%d", topicName(name, dests[name]), p.ready, p.total))
		}
	}
	return &waitIncompleteError{fmt.Sprintf("not every partition was %s after %s (%s); the %s itself is done and goes on",
		target, c.opts.wait, strings.Join(behind, ", "), c.opts.action)}
}
