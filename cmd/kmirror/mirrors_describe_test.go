package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"kmirror/openapi/client"
	"strings"
	"testing"
)

// TestDescribeReadsEveryPage: a describe of more rows than a page of
// GET /v1/partitions holds (1,000 by default) prints them all, once each
// and in order, as a table and as JSON, and with a topic filter.
func TestDescribeReadsEveryPage(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror big.\n", "--create", "--mirror", "big", "--source-bootstrap", e.source)
	// 25 topics of 100 partitions, written as the add would write them
	// (the source cluster has no such topics): 2,500 rows, three pages.
	const topics, partitions = 25, 100
	for _, sql := range []string{
		`INSERT INTO mirror_topics (mirror, topic, desired_state)
			SELECT 'big', format('t%s', lpad(g::text, 2, '0')), 'mirroring' FROM generate_series(0, 24) g`,
		`INSERT INTO mirror_partitions (mirror, topic, partition)
			SELECT 'big', format('t%s', lpad(g::text, 2, '0')), p FROM generate_series(0, 24) g, generate_series(0, 99) p`,
	} {
		if _, err := e.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	// want lists "topic partition" of topics first..last, in order.
	want := func(first, last int) []string {
		var out []string
		for g := first; g <= last; g++ {
			for p := range partitions {
				out = append(out, fmt.Sprintf("t%02d %d", g, p))
			}
		}
		return out
	}
	table := func(args ...string) []string {
		t.Helper()
		code, out, errOut := e.mirrors(t, append([]string{"--describe", "--mirror", "big"}, args...)...)
		if code != 0 {
			t.Fatalf("describe %v: exit %d: %s", args, code, errOut)
		}
		table, _, _ := strings.Cut(out, "\n\n") // the last sync follows the table
		lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
		if lines[0] != describeHeader {
			t.Fatalf("describe %v: header %q", args, lines[0])
		}
		var got []string
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if f[0] != "big" {
				t.Fatalf("describe %v: row %q", args, l)
			}
			got = append(got, f[1]+" "+f[2])
		}
		return got
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: row %d is %q, want %q", what, i, got[i], want[i])
			}
		}
	}
	same("describe", table(), want(0, topics-1))
	same("describe --topic 't0.*|t1[0-4]'", table("--topic", "t0.*|t1[0-4]"), want(0, 14))

	code, out, errOut := e.mirrors(t, "--describe", "--mirror", "big", "--json")
	if code != 0 {
		t.Fatalf("describe --json: exit %d: %s", code, errOut)
	}
	var rows []struct {
		Topic     string `json:"topic"`
		Partition int    `json:"partition"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("describe --json: %v", err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %d", r.Topic, r.Partition))
	}
	same("describe --json", got, want(0, topics-1))
}

// TestDescribeSaysReadOnlyOncePerAnswer: whether read-only is enforced is
// one line for every topic with the same answer, not one per topic.
func TestDescribeSaysReadOnlyOncePerAnswer(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	row := func(topic string, partition int, enforced *bool) client.PartitionRow {
		return client.PartitionRow{Mirror: "demo", Topic: topic, Partition: partition, State: "MIRRORING",
			LeaseLive: true, ReadOnlyEnforced: enforced}
	}
	var b bytes.Buffer
	writeDescribeTable(&b, []client.PartitionRow{row("orders", 0, &no), row("orders", 1, &no), row("payments", 0, &no),
		row("audit", 0, &yes)})
	out := b.String()
	for _, want := range []string{
		"\nRead-only enforced on demo/audit: a DENY WRITE ACL for User:* is set on each destination topic\n",
		"\nRead-only not enforced on demo/orders, demo/payments: the destination has no authorizer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "Read-only"); n != 2 {
		t.Errorf("%d read-only lines, want 2:\n%s", n, out)
	}
}
