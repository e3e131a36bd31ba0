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
// describe table: when it ran, how long it took, and each kind's outcome;
// then the mirror's source Schema Registry, when it names one.
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
	if line := schemaRegistryLine(mirror, resp.JSON200.Source.SchemaRegistry); line != "" {
		fmt.Fprintf(c.stdout, "\n%s\n", line)
		writeSchemaSync(c.stdout, mirror, resp.JSON200.SchemaSync)
	}
	return nil
}

// writeSchemaSync prints a mirror's last Schema Registry sync: when, its
// outcome, and a line per subject.
func writeSchemaSync(w io.Writer, mirror string, r *client.SchemaSyncResult) {
	if r == nil {
		fmt.Fprintf(w, "Schemas of %s: none synced yet (the sync runs on servers started with --destination-schema-registry-url)\n", mirror)
		return
	}
	state := "ok"
	if !r.Ok {
		state = "ERROR"
		if r.Error != nil && *r.Error != "" {
			state += " " + *r.Error
		}
	}
	fmt.Fprintf(w, "Schemas of %s: last sync %s, %s; %d subject(s), %d version(s) in step", mirror,
		r.FinishedAt.Format(time.RFC3339), state, len(r.Subjects), r.Versions)
	if !r.Ok && r.LastOkAt != nil {
		fmt.Fprintf(w, "; last success %s", r.LastOkAt.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	for _, s := range r.Subjects {
		name := s.Source
		if s.Destination != s.Source {
			name += " → " + s.Destination
		}
		line := fmt.Sprintf("  %s: %d version(s)", name, s.Versions)
		if s.Mode != nil {
			line += ", " + string(*s.Mode)
		}
		if s.Error != nil && *s.Error != "" {
			line += ": ERROR " + *s.Error
		}
		fmt.Fprintln(w, line)
	}
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
