package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"kmirror/openapi/client"
)

// sync runs a metadata sync pass now and prints its result; a pass with a
// failed kind exits 1.
func (c *mirrorsCLI) sync(ctx context.Context) error {
	resp, err := c.api.SyncMirrorWithResponse(ctx, c.opts.mirror)
	if err := c.check(resp, err, 200); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	writeLastSync(c.stdout, c.opts.mirror, resp.JSON200)
	if !resp.JSON200.Ok {
		return fmt.Errorf("the sync pass of mirror %s had errors", c.opts.mirror)
	}
	return nil
}

// printLastSync prints the last metadata sync pass of a mirror below the
// describe table: when it ran, how long it took, and each kind's outcome.
func (c *mirrorsCLI) printLastSync(ctx context.Context, mirror string) error {
	resp, err := c.api.GetMirrorWithResponse(ctx, mirror)
	if err := c.check(resp, err, 200); err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return c.unexpected(resp)
	}
	// A blank line sets it apart from the describe table above.
	fmt.Fprintln(c.stdout)
	writeLastSync(c.stdout, mirror, resp.JSON200.LastSync)
	return nil
}

func writeLastSync(w io.Writer, mirror string, r *client.SyncResult) {
	if r == nil || r.StartedAt.IsZero() {
		fmt.Fprintf(w, "Last sync of %s: none yet\n", mirror)
		return
	}
	fmt.Fprintf(w, "Last sync of %s: %s (%d ms, %s)\n", mirror,
		r.StartedAt.Format(time.RFC3339Nano), r.DurationMs, r.Trigger)
	kinds := []struct {
		name string
		o    client.SyncOutcome
	}{{"topic configs", r.TopicConfigs}, {"partitions", r.Partitions}, {"new topics", r.NewTopics},
		{"deleted topics", r.DeletedTopics}, {"acls", r.Acls}, {"paused topics", r.PausedTopics}}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, k.name+": "+outcome(k.o.Ok, val(k.o.Error)))
	}
	g := r.GroupOffsets
	parts = append(parts, "group offsets: "+outcome(g.Ok, val(g.Error)))
	fmt.Fprintf(w, "  %s\n", strings.Join(parts, "\n  "))
}

func outcome(ok bool, errText string) string {
	if ok {
		return "ok"
	}
	if errText == "" {
		errText = "failed"
	}
	return "ERROR " + errText
}
