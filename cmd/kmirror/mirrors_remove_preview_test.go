package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMirrorsRemoveDryRun: --remove --dry-run prints, per partition, what a
// failover now would leave behind, and changes nothing.
func TestMirrorsRemoveDryRun(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror demo.\n", "--create", "--mirror", "demo", "--source-bootstrap", e.source)
	e.mustMirrors(t, "Added 1 topic(s) to mirror demo: [my-topic]\n", "--add", "--mirror", "demo", "--topic", "my-topic")

	// my-topic/1 holds 12 records, none mirrored; my-topic/0 and /2 are
	// empty, and /0 is MIRRORING (no worker runs here).
	base := time.Date(2026, 12, 4, 17, 20, 0, 0, time.UTC)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.source, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for i := range 12 {
		r := &kgo.Record{Topic: "my-topic", Partition: 1, Timestamp: base.Add(time.Duration(i)*time.Second + 123*time.Millisecond)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE mirror_partitions SET state = 'MIRRORING'
		WHERE mirror = 'demo' AND topic = 'my-topic' AND partition IN (0, 1)`); err != nil {
		t.Fatal(err)
	}

	row := func(partition int, state, lag, newest string) string {
		return fmt.Sprintf(failoverFormat, "demo", "my-topic", fmt.Sprint(partition), state, lag, newest)
	}
	want := fmt.Sprintf(failoverFormat, "MIRROR", "TOPIC", "PARTITION", "STATE", "LAG", "NEWEST-NOT-COPIED") +
		row(0, "MIRRORING", "0", "-") +
		row(1, "MIRRORING", "12", "2026-12-04T17:20:11.123Z") +
		row(2, "UNKNOWN", "0", "-")
	// The last line says how old the oldest record left behind is: the
	// first of my-topic/1's, stamped base + 123 ms.
	code, out, errOut := e.mirrors(t, "--remove", "--dry-run", "--mirror", "demo", "--topic", "my-.*")
	table, last, _ := strings.Cut(out, "Removing")
	m := regexp.MustCompile(`^ would leave 12 record\(s\) of 1 topic\(s\) behind \(the oldest (\S+) old\); nothing was changed \(dry run\)\.\n$`).FindStringSubmatch(last)
	if code != 0 || table != want || m == nil {
		t.Fatalf("--remove --dry-run: exit %d, stderr %q, stdout\n%q\nwant\n%q and the oldest's age", code, errOut, out, want)
	}
	age, err := time.ParseDuration(m[1])
	// The printed age is rounded, so it may read up to a second more.
	if oldest := time.Since(base.Add(123 * time.Millisecond)); err != nil || age > oldest+time.Second || age < oldest-time.Minute {
		t.Errorf("the oldest record left behind is %s old, want about %s", m[1], oldest.Round(time.Second))
	}

	// Nothing changed: a real remove still finds the topic mirroring.
	e.mustMirrors(t, "Removed 1 topic(s) from mirror demo: [my-topic]\n", "--remove", "--mirror", "demo", "--topic", "my-topic")
	e.wantFailure(t, 1, []string{"Error: ", "my-topic is stopped"}, "--remove", "--dry-run", "--mirror", "demo", "--topic", "my-topic")

	code, out, errOut = e.mirrors(t, "--remove", "--dry-run", "--wait", "5s", "--mirror", "demo", "--topic", "my-topic")
	if code != 2 || out != "" || !strings.Contains(errOut, "--wait does not apply to --remove --dry-run") {
		t.Errorf("--remove --dry-run --wait: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestFailoverTableNothingBehind: a preview with no lag says so.
func TestFailoverTableNothingBehind(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	writeFailoverTable(&b, "demo", nil)
	want := fmt.Sprintf(failoverFormat, "MIRROR", "TOPIC", "PARTITION", "STATE", "LAG", "NEWEST-NOT-COPIED") +
		"Removing would leave no record behind; nothing was changed (dry run).\n"
	if b.String() != want {
		t.Fatalf("table\n%q\nwant\n%q", b.String(), want)
	}
}

// TestFailoverTableCountsDataRecords: transaction markers and aborted
// records are in the lag, never in what a failover would leave behind.
func TestFailoverTableCountsDataRecords(t *testing.T) {
	t.Parallel()
	e := newMirrorsEnv(t)
	e.mustMirrors(t, "Created mirror demo.\n", "--create", "--mirror", "demo", "--source-bootstrap", e.source)
	e.mustMirrors(t, "Added 1 topic(s) to mirror demo: [my-topic]\n", "--add", "--mirror", "demo", "--topic", "my-topic")
	// Three committed records in three transactions on my-topic/0: six
	// offsets, three of them markers.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.source, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("preview-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range 3 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "my-topic", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := e.mirrors(t, "--remove", "--dry-run", "--mirror", "demo", "--topic", "my-topic")
	if code != 0 || !strings.Contains(out, "Removing would leave 3 record(s) of 1 topic(s) behind") {
		t.Fatalf("--remove --dry-run: exit %d, %s%s", code, out, errOut)
	}
}
