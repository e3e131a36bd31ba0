package service_test

import (
	"regexp"
	"testing"

	"kmirror/service"
)

// TestRemoveRecordsTheLagInTime: a failover's event says how old the oldest
// record not copied was at the remove (what a recovery point objective is
// written in), or that nothing was behind.
func TestRemoveRecordsTheLagInTime(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc, pool, bootstrap := newService(t)
	for _, m := range []string{"behind", "caught-up"} {
		topic := map[string]string{"behind": "orders", "caught-up": "payments"}[m]
		if _, err := svc.CreateMirror(ctx, service.MirrorInput{Name: m, Source: service.SourceInput{BootstrapServers: bootstrap}},
			service.WriteOpts{}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.AddTopics(ctx, m, service.AddTopicsInput{Topic: topic}); err != nil {
			t.Fatal(err)
		}
	}
	// orders/0 is 90 s behind, its other partitions caught up; payments is
	// caught up.
	if _, err := pool.Exec(ctx, `UPDATE mirror_partitions SET state = 'MIRRORING', src_next = 10, dst_next = 10,
		source_end_offset = CASE WHEN topic = 'orders' AND partition = 0 THEN 15 ELSE 10 END,
		oldest_uncopied_src = 10, oldest_uncopied_at = now() - interval '90 seconds'`); err != nil {
		t.Fatal(err)
	}
	for m, want := range map[string]*regexp.Regexp{
		"behind":    regexp.MustCompile(`; the oldest record not copied was 1m3\d(\.\d+)?s old \(lag in time\)`),
		"caught-up": regexp.MustCompile(`; no record was behind \(lag in time 0\)$`),
	} {
		topic := map[string]string{"behind": "orders", "caught-up": "payments"}[m]
		if _, err := svc.RemoveTopics(ctx, m, topic); err != nil {
			t.Fatal(err)
		}
		var msg string
		if err := pool.QueryRow(ctx, `SELECT message FROM events WHERE mirror = $1 AND kind = $2`, m,
			service.EventTopicsRemoved).Scan(&msg); err != nil {
			t.Fatal(err)
		}
		if !want.MatchString(msg) {
			t.Errorf("%s's remove event %q does not match %s", m, msg, want)
		}
	}
}
