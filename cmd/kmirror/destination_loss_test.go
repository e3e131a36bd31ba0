package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/workers/statetopic"
)

// TestDestinationBackEmptyThroughTheAPI is the destination's bad day as an
// operator sees it, end to end through a server: the destination cluster
// goes away under traffic and comes back empty. Describe says so in every
// row within 10 s of its return; within 60 s every row is MIRRORING again
// with no error and the destination holds exactly the source's records; the
// event stream names the loss for each partition, /metrics counts it, and
// __mirror_state is back on the destination with the mirror's state.
func TestDestinationBackEmptyThroughTheAPI(t *testing.T) {
	t.Parallel()
	s := startInProcessServer(t, slog.New(slog.DiscardHandler))
	c := apiClient{tb: t, base: s.base, http: &http.Client{Timeout: 30 * time.Second}}
	c.post("/v1/mirrors", fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%q}}`, s.clusters.SourceAddr()))
	c.post("/v1/mirrors/m/topics:add", `{"topic":"bench"}`)
	c.waitAll("MIRRORING", 60*time.Second)
	stopTraffic := benchTraffic(t, s.clusters.SourceAddr())
	defer stopTraffic()
	waitRows(t, c, 30*time.Second, "every partition to copy records", func(r describeRow) bool {
		return r.DestinationOffset != nil && *r.DestinationOffset > 10
	})

	if err := s.clusters.Down("destination"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // an outage longer than a session waits for its copies
	if err := s.clusters.UpEmpty("destination"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// Each row says so until it is re-aligned; they need not all say it
	// in the same poll.
	said := map[int32]bool{}
	waitRows(t, c, 10*time.Second, "describe to say the destination lost its records", func(r describeRow) bool {
		if r.Error != nil && strings.Contains(*r.Error, "destination lost this partition's records") {
			said[r.Partition] = true
		}
		return said[r.Partition]
	})
	t.Logf("describe said so %s after the destination came back", time.Since(back).Round(time.Millisecond))
	waitRows(t, c, 60*time.Second, "every partition MIRRORING again with no error", func(r describeRow) bool {
		return r.State == "MIRRORING" && r.Error == nil && r.ProgressedAt != nil && r.ProgressedAt.After(back)
	})
	stopTraffic()
	waitExact(t, s.clusters.SourceAddr(), s.clusters.DestinationAddr(), "bench", 3, 60*time.Second)
	t.Logf("exact again %s after the destination came back", time.Since(back).Round(time.Millisecond))
	for _, r := range rows(t, c) {
		if r.State != "MIRRORING" {
			t.Errorf("bench/%d is %s", r.Partition, r.State)
		}
	}

	// The event stream names the loss and where each partition started again.
	losses := eventsMatching(t, s.base, "/v1/events?mirror=m&since=0", 3, 10*time.Second, func(data string) bool {
		return strings.Contains(data, "destination lost its records; re-mirroring from offset")
	})
	t.Logf("events: %s", strings.Join(losses, " | "))
	if n := metricSum(t, scrape(t, s.base), `kmirror_destination_losses_total{mirror="m",topic="bench"}`); n < 3 {
		t.Errorf("kmirror_destination_losses_total for bench is %v, want 3 or more", n)
	}
	// __mirror_state is back, with the mirror and its partitions.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		state, err := statetopic.ReadState(ctx, kafkaconn.Config{BootstrapServers: []string{s.clusters.DestinationAddr()}})
		cancel()
		missing := []string{}
		for _, key := range []string{"mirror/m", "partition/m/bench/0", "partition/m/bench/1", "partition/m/bench/2"} {
			if err != nil || state[key] == nil {
				missing = append(missing, key)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("__mirror_state on the destination lacks %v (read error: %v)", missing, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describeRow is the part of a describe row these tests read.
type describeRow struct {
	Partition         int32      `json:"partition"`
	State             string     `json:"state"`
	Error             *string    `json:"error"`
	DestinationOffset *int64     `json:"destination_offset"`
	ProgressedAt      *time.Time `json:"progressed_at"`
}

func rows(t *testing.T, c apiClient) []describeRow {
	t.Helper()
	status, body := c.do(http.MethodGet, "/v1/partitions?mirror=m&topic=bench", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/partitions: %d %s", status, body)
	}
	var out struct {
		Partitions []describeRow `json:"partitions"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Partitions
}

// waitRows polls describe until cond holds for each of bench's 3 rows.
func waitRows(t *testing.T, c apiClient, timeout time.Duration, what string, cond func(describeRow) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rs := rows(t, c)
		ok := len(rs) == 3
		var desc []string
		for _, r := range rs {
			ok = ok && cond(r)
			e := ""
			if r.Error != nil {
				e = *r.Error
			}
			desc = append(desc, fmt.Sprintf("%d=%s %q", r.Partition, r.State, e))
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, strings.Join(desc, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitExact waits until every partition of the destination topic holds
// exactly the source's records (values and keys, in order).
func waitExact(t *testing.T, src, dst, topic string, partitions int32, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		diff := ""
		for p := int32(0); p < partitions && diff == ""; p++ {
			a, b := readAll(t, src, topic, p), readAll(t, dst, topic, p)
			if len(a) != len(b) {
				diff = fmt.Sprintf("%s/%d: source %d records, destination %d", topic, p, len(a), len(b))
				break
			}
			for i := range a {
				if err := kafkaconn.SameRecord(a[i], b[i]); err != nil {
					t.Fatalf("%s/%d record %d (source offset %d, destination %d): %v", topic, p, i, a[i].Offset, b[i].Offset, err)
				}
			}
		}
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not exact after %s: %s", timeout, diff)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventsMatching reads an event stream until n messages' data match, and
// returns them.
func eventsMatching(t *testing.T, base, path string, n int, timeout time.Duration, match func(string) bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && match(data) {
			got = append(got, data)
			if len(got) == n {
				return got
			}
		}
	}
	t.Fatalf("%s: %d matching event(s) within %s, want %d: %v", path, len(got), timeout, n, got)
	return nil
}

// readAll reads every record of a topic partition, from its log start to its
// end.
func readAll(t *testing.T, addr, topic string, p int32) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn := kafkaconn.Config{BootstrapServers: []string{addr}}
	adm, err := conn.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	off, err := kafkaconn.ReadOffsets(ctx, adm, topic, p, false)
	if errors.Is(err, kafkaconn.ErrTopicMissing) {
		return nil
	} else if err != nil {
		t.Fatalf("offsets of %s/%d at %s: %v", topic, p, addr, err)
	}
	recs, err := kafkaconn.ReadRecords(ctx, conn, topic, p, off.Start, off.End, int(off.End-off.Start)+1, false)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// metricSum adds up the samples of an exposition whose series starts with
// prefix (a name and some of its labels).
func metricSum(t *testing.T, body []byte, prefix string) float64 {
	t.Helper()
	name, labels, _ := strings.Cut(strings.TrimSuffix(prefix, "}"), "{")
	sum := 0.0
	for line := range strings.Lines(string(body)) {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], name+"{") {
			continue
		}
		if labels != "" && !strings.Contains(f[0], labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(f[1], &v); err == nil {
			sum += v
		}
	}
	return sum
}
