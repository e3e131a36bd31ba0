package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"kmirror/openapi/client"
)

// failoverFormat lays out the remove preview like the describe table: the
// seed's widths for MIRROR, TOPIC and PARTITION, STATE as wide as its
// longest value, and the timestamp last, unpadded.
const failoverFormat = "%-30s %-40s %-10s %-12s %-8s %s\n"

// previewRemove prints what removing the topics now would leave behind,
// per partition, from topics:remove?dry_run=true; nothing is changed.
func (c *mirrorsCLI) previewRemove(ctx context.Context) error {
	resp, err := c.api.RemoveTopicsWithResponse(ctx, c.opts.mirror, &client.RemoveTopicsParams{DryRun: ptr(true)},
		client.TopicsRequest{Topic: c.opts.topic})
	if err := c.check(resp, err, http.StatusOK); err != nil {
		return err
	}
	if resp.JSON200 == nil || resp.JSON200.Failover == nil {
		return c.unexpected(resp)
	}
	writeFailoverTable(c.stdout, c.opts.mirror, *resp.JSON200.Failover)
	return nil
}

func writeFailoverTable(w io.Writer, mirror string, topics []client.TopicFailoverPreview) {
	fmt.Fprintf(w, failoverFormat, "MIRROR", "TOPIC", "PARTITION", "STATE", "LAG", "NEWEST-NOT-COPIED")
	var records, lagging int
	oldest := -1 // the oldest record not copied, its age in ms
	for _, t := range topics {
		for _, p := range t.Partitions {
			if a := p.OldestNotCopiedAgeMs; a != nil && *a > oldest {
				oldest = *a
			}
			newest := "-"
			if p.NewestNotCopied != nil {
				// Kafka timestamps are milliseconds.
				newest = p.NewestNotCopied.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			}
			fmt.Fprintf(w, failoverFormat, mirror, topicName(t.Topic, t.DestinationTopic), strconv.Itoa(p.Partition),
				string(p.State), offset(p.Lag), newest)
		}
		// The data records: markers and aborted records are never
		// copied, so a failover loses none of them.
		if t.Records > 0 {
			records += int(t.Records)
			lagging++
		}
	}
	if records == 0 {
		fmt.Fprintln(w, "Removing would leave no record behind; nothing was changed (dry run).")
		return
	}
	age := ""
	if oldest >= 0 {
		age = fmt.Sprintf(" (the oldest %s old)", lagTime(&oldest))
	}
	fmt.Fprintf(w, "Removing would leave %d record(s) of %d topic(s) behind%s; nothing was changed (dry run).\n", records, lagging, age)
}
