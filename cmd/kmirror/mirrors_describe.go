package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"kmirror/openapi/client"
)

// describeFormat reproduces the seed's describe table: each column is
// left-aligned and padded to the seed's width (31, 41, 11, 16, 19, 9 and 12
// characters, STATE included, so lines carry its trailing spaces). A value
// longer than its column still gets one space before the next. LAG-TIME,
// kmirror's own, comes after the seed's columns, unpadded.
const describeFormat = "%-30s %-40s %-10s %-15s %-18s %-8s %-12s %s\n"

// describe prints the describe rows. The seed's seven columns are kept
// exactly; what they cannot show (an error with its retry attempt, records
// lost to source retention) goes on one line per affected partition below
// the table, as MIRROR/TOPIC/PARTITION: .... --json prints every field.
// Every page of GET /v1/partitions is read before anything is printed.
func (c *mirrorsCLI) describe(ctx context.Context) error {
	params := &client.ListPartitionsParams{Mirror: ptrOrNil(c.opts.mirror), Topic: ptrOrNil(c.opts.topic)}
	if c.opts.failed {
		params.State = ptr(client.PartitionStateFailed)
	}
	rows, raw, err := c.listPartitions(ctx, params)
	if err != nil {
		return err
	}
	if c.opts.json {
		return printRowsJSON(c.stdout, raw)
	}
	slices.SortStableFunc(rows, func(a, b client.PartitionRow) int {
		return cmp.Or(cmp.Compare(a.Mirror, b.Mirror), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	writeDescribeTable(c.stdout, rows)
	if c.opts.mirror != "" {
		return c.printLastSync(ctx, c.opts.mirror)
	}
	return nil
}

// listPartitions reads every page of GET /v1/partitions, following
// next_cursor until a page has none. It returns the rows both decoded and
// as the server sent them (raw), so --json keeps unknown offsets null.
func (c *mirrorsCLI) listPartitions(ctx context.Context, params *client.ListPartitionsParams) ([]client.PartitionRow, []json.RawMessage, error) {
	var rows []client.PartitionRow
	var raw []json.RawMessage
	for {
		resp, err := c.api.ListPartitionsWithResponse(ctx, params)
		if err := c.check(resp, err, http.StatusOK); err != nil {
			return nil, nil, err
		}
		if resp.JSON200 == nil {
			return nil, nil, c.unexpected(resp)
		}
		var page struct {
			Partitions []json.RawMessage `json:"partitions"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return nil, nil, fmt.Errorf("decode the partitions: %w", err)
		}
		rows = append(rows, resp.JSON200.Partitions...)
		raw = append(raw, page.Partitions...)
		next := val(resp.JSON200.NextCursor)
		if next == "" {
			return rows, raw, nil
		}
		if next == val(params.Cursor) {
			// A server that hands back the cursor it was given would
			// keep this loop going for ever.
			return nil, nil, fmt.Errorf("the kmirror server at %s returned the same page cursor twice", c.server)
		}
		params.Cursor = &next
	}
}

func writeDescribeTable(w io.Writer, rows []client.PartitionRow) {
	fmt.Fprintf(w, describeFormat, "MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE", "LAG-TIME")
	var notes []string
	// Topics by whether read-only is enforced on them, each once: one
	// line says it for all of them, as it is mostly the destination's
	// doing rather than the topic's.
	readOnly := map[bool][]string{}
	seen := map[string]bool{}
	for _, r := range rows {
		if topic := r.Mirror + "/" + r.Topic; r.ReadOnlyEnforced != nil && !seen[topic] {
			seen[topic] = true
			readOnly[*r.ReadOnlyEnforced] = append(readOnly[*r.ReadOnlyEnforced], topic)
		}
		fmt.Fprintf(w, describeFormat, r.Mirror, topicName(r.Topic, r.DestinationTopic), strconv.Itoa(r.Partition),
			offset(r.SourceOffset), offset(r.DestinationOffset), offset(r.Lag), string(r.State), lagTime(r.LagMs))
		if note := partitionNote(r); note != "" {
			notes = append(notes, fmt.Sprintf("%s/%s/%d: %s", r.Mirror, r.Topic, r.Partition, note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	}
	if len(readOnly) > 0 {
		fmt.Fprintln(w)
	}
	if ts := readOnly[true]; len(ts) > 0 {
		fmt.Fprintf(w, "Read-only enforced on %s: a DENY WRITE ACL for User:* is set on each destination topic\n", strings.Join(ts, ", "))
	}
	if ts := readOnly[false]; len(ts) > 0 {
		fmt.Fprintf(w, "Read-only not enforced on %s: the destination has no authorizer that could refuse other writers, or the topic is stopped\n",
			strings.Join(ts, ", "))
	}
}

// offset prints a known offset or lag, and - for an unknown one.
func offset(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// lagTime prints a lag in time (the age of the oldest record not yet
// copied): 0s when caught up, tenths of a second under a minute, whole
// seconds above; - when unknown.
func lagTime(ms *int) string {
	switch {
	case ms == nil:
		return "-"
	case *ms == 0:
		return "0s"
	case *ms < 60_000:
		return fmt.Sprintf("%.1fs", float64(*ms)/1000)
	}
	return (time.Duration(*ms) * time.Millisecond).Round(time.Second).String()
}

// partitionNote says what the table's columns cannot: the partition's error
// and retry attempt, records lost to source retention, and a divergent tail
// a failback kept.
func partitionNote(r client.PartitionRow) string {
	var parts []string
	if e := val(r.Error); e != "" {
		if n := r.RetryAttempt; n > 0 {
			e += fmt.Sprintf(" (retry attempt %d)", n)
		}
		parts = append(parts, e)
	}
	if n := r.LostRecords; n > 0 {
		parts = append(parts, fmt.Sprintf("%d record(s) removed by source retention before they were mirrored", n))
	}
	if d := r.DivergentTail; d != nil {
		parts = append(parts, fmt.Sprintf("kept a divergent tail: %d record(s) at destination offsets [%d, %d) that the source never had",
			d.Records, d.StartOffset, d.EndOffset))
	}
	switch r.State {
	case client.PartitionStatePreparing, client.PartitionStateMirroring, client.PartitionStatePausing, client.PartitionStateStopping:
		// The state says work is under way: say so when nobody does it.
		if !r.LeaseLive {
			note := "no live owner: the state is what the last owner left, until another instance takes over"
			if o, at := val(r.Owner), r.OwnerRenewedAt; o != "" && at != nil {
				note += fmt.Sprintf(" (%s last renewed %s)", o, at.Format(time.RFC3339Nano))
			}
			parts = append(parts, note)
		}
	}
	return strings.Join(parts, "; ")
}

// printRowsJSON prints the rows as one JSON array, each as the server sent
// it, so unknown offsets stay null.
func printRowsJSON(w io.Writer, rows []json.RawMessage) error {
	list, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("encode the partitions: %w", err)
	}
	if rows == nil {
		list = []byte("[]")
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, list, "", "  "); err != nil {
		return fmt.Errorf("encode the partitions: %w", err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}
