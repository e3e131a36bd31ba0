package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"kmirror/openapi/client"
)

// continuationFormat lays out an add's continue preview like the describe
// table: MIRROR, TOPIC and PARTITION at the seed's widths, then what the
// partition would do.
const continuationFormat = "%-30s %-40s %-10s %-9s %-11s %-17s %-12s %s\n"

// previewAdd prints what adding the topics would do, from
// topics:add?dry_run=true; nothing is changed. With --continue it prints
// per partition how the destination's history would be proven, what is
// left to copy and any divergent tail, and why a partition would fail.
func (c *mirrorsCLI) previewAdd(ctx context.Context, body client.AddTopicsRequest) error {
	resp, err := c.api.AddTopicsWithResponse(ctx, c.opts.mirror, &client.AddTopicsParams{DryRun: ptr(true), SkipChecks: ptrOrNil(c.opts.skipChecks)}, body)
	if err := c.check(resp, err, http.StatusOK); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	res := resp.JSON200
	if res.Continuation == nil {
		list := topicList(res.Topics)
		if res.Matches != nil {
			list = matchList(*res.Matches)
		}
		fmt.Fprintf(c.stdout, "Adding would start mirroring %d topic(s) in mirror %s: %s; nothing was changed (dry run).\n",
			len(res.Topics), c.opts.mirror, list)
		if res.Matches != nil {
			for _, m := range *res.Matches {
				if m.ForeignRecords != nil && *m.ForeignRecords > 0 {
					fmt.Fprintf(c.stdout, "Recreating %s would delete %d record(s) this mirror did not write.\n",
						m.DestinationTopic, *m.ForeignRecords)
				}
			}
		}
		return nil
	}
	writeContinuationTable(c.stdout, c.opts.mirror, *res.Continuation)
	return nil
}

func writeContinuationTable(w io.Writer, mirror string, topics []client.TopicContinuation) {
	fmt.Fprintf(w, continuationFormat, "MIRROR", "TOPIC", "PARTITION", "OUTCOME", "PROOF", "OVERLAP-SRC→DST", "TO-COPY", "DIVERGENT-TAIL")
	var toCopy, partitions, failing, tails int
	var notes []string
	for _, t := range topics {
		for _, p := range t.Partitions {
			proof, overlap, tail := "-", "-", "-"
			if p.Proof != nil {
				proof = string(*p.Proof)
			}
			if p.OverlapSourceOffset != nil && p.OverlapDestinationOffset != nil {
				overlap = fmt.Sprintf("%d→%d", *p.OverlapSourceOffset, *p.OverlapDestinationOffset)
			}
			if d := p.DivergentTail; d != nil {
				tail = fmt.Sprintf("%d in [%d, %d)", d.Records, d.StartOffset, d.EndOffset)
				tails++
			}
			fmt.Fprintf(w, continuationFormat, mirror, topicName(t.Topic, t.DestinationTopic), strconv.Itoa(p.Partition), string(p.Outcome), proof, overlap,
				strconv.Itoa(p.RecordsToCopy), tail)
			partitions++
			if p.Outcome == client.PartitionContinuationOutcomeFail {
				failing++
				notes = append(notes, fmt.Sprintf("  %s/%d: %s", t.Topic, p.Partition, p.Detail))
				continue
			}
			toCopy += p.RecordsToCopy
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	summary := fmt.Sprintf("Adding would copy up to %d source offset(s) for %d partition(s)", toCopy, partitions-failing)
	if tails > 0 {
		summary += fmt.Sprintf("; %d partition(s) hold a divergent tail", tails)
	}
	if failing > 0 {
		summary += fmt.Sprintf("; %d partition(s) would go FAILED (above)", failing)
	}
	fmt.Fprintln(w, summary+"; nothing was changed (dry run).")
}
