package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scrape returns the server's /metrics exposition.
func scrape(t *testing.T, base string) []byte {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %s", err, resp.Status)
	}
	return body
}

// TestMetricsLint lints the /metrics output of a full server that mirrors
// a topic, as `promtool check metrics` does (promtool runs this same
// promlint package), and checks that the series operators alert on exist:
// every partition state with zeros included, and the mirrored counters.
func TestMetricsLint(t *testing.T) {
	t.Parallel()
	base, clusters := startInProcess(t, slog.New(slog.DiscardHandler))
	cli := func(args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(t.Context(), append([]string{"mirrors", "--server", base}, args...), &out, &errOut); code != 0 {
			t.Fatalf("mirrors %v: exit %d: %s", args, code, errOut.String())
		}
	}
	cli("--create", "--mirror", "m", "--source-bootstrap", clusters.SourceAddr())
	cli("--add", "--mirror", "m", "--topic", "bench", "--wait", "60s")
	cl, err := kgo.NewClient(kgo.SeedBrokers(clusters.SourceAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range 30 {
		rs = append(rs, &kgo.Record{Topic: "bench", Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		body = scrape(t, base)
		// The probes record reachability once a lease is held.
		if bytes.Contains(body, []byte("kmirror_mirrored_records_total{")) &&
			bytes.Contains(body, []byte(`kmirror_cluster_reachable{cluster="source",mirror="m"}`)) &&
			bytes.Contains(body, []byte(`kmirror_cluster_reachable{cluster="destination"`)) &&
			bytes.Contains(body, []byte(`kmirror_replication_lag_seconds{mirror="m",topic="bench"}`)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		`kmirror_partitions{mirror="m",state="MIRRORING",topic="bench"} 3`,
		`kmirror_partitions{mirror="m",state="FAILED",topic="bench"} 0`,
		`kmirror_partitions{mirror="m",state="PAUSED",topic="bench"} 0`,
		`kmirror_mirrored_records_total{mirror="m",topic="bench"}`,
		`kmirror_mirrored_bytes_total{mirror="m",topic="bench"}`,
		`kmirror_last_mirrored_timestamp_seconds{mirror="m",topic="bench"}`,
		`kmirror_lag_records{mirror="m",topic="bench"}`,
		`kmirror_partition_lag_records{mirror="m",partition="0",topic="bench"}`,
		`kmirror_replication_lag_seconds{mirror="m",topic="bench"}`,
		`kmirror_http_requests_total{`,
		`kmirror_outbox_unpublished_rows `,
		`kmirror_checkpoint_save_duration_seconds_count `,
		`kmirror_produce_request_duration_seconds_count `,
		`kmirror_fetch_request_duration_seconds_count{mirror="m"}`,
		`kmirror_lease_renewal_duration_seconds_count `,
		`kmirror_lease_renewal_failures_total{kind="partition"} 0`,
		`kmirror_cluster_reachable{cluster="source",mirror="m"} 1`,
		`kmirror_cluster_reachable{cluster="destination",mirror=""} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	checkMetricsDocs(t, metricTypes(body))
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
