package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"kmirror/openapi/client"
)

// checkMirror runs a mirror's preflight checks and prints one row per
// check; a failed check exits 1, warnings do not.
func (c *mirrorsCLI) checkMirror(ctx context.Context) error {
	body := client.CheckMirrorRequest{Topic: ptrOrNil(c.opts.topic)}
	if c.opts.set["replication-factor"] {
		body.ReplicationFactor = ptr(c.opts.replicationFactor)
	}
	resp, err := c.api.CheckMirrorWithResponse(ctx, c.opts.mirror, body)
	if err := c.check(resp, err, 200); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	res := resp.JSON200
	writeChecks(c.stdout, res)
	if res.Status == client.MirrorCheckResultStatusFail {
		return fmt.Errorf("mirror %s failed its checks: grant what the FAIL rows say, then check again", c.opts.mirror)
	}
	return nil
}

// writeChecks prints a preflight's rows, then what to grant for each that
// did not pass.
func writeChecks(w io.Writer, res *client.MirrorCheckResult) {
	topics := "none"
	if len(res.Topics) > 0 {
		topics = fmt.Sprint(res.Topics)
	}
	fmt.Fprintf(w, "Checks of mirror %s, topics %s:\n", res.Mirror, topics)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tCHECK\tSTATUS\tDETAIL")
	for _, r := range res.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Cluster, r.Check, strings.ToUpper(string(r.Status)), r.Detail)
	}
	tw.Flush()
	first := true
	for _, r := range res.Checks {
		if r.Status == client.MirrorCheckStatusPass || r.Grant == nil || *r.Grant == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nTo grant or change:")
			first = false
		}
		fmt.Fprintf(w, "  %s %s: %s\n", r.Cluster, r.Check, *r.Grant)
	}
	fmt.Fprintf(w, "\nResult: %s\n", strings.ToUpper(string(res.Status)))
}
