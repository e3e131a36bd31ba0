package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
)

// deployment is one kmirror deployment of a conformance scenario: its own
// database and server, whose destination is to.
type deployment struct {
	t         testing.TB
	c         *conformance
	to        kafkaconn.Config
	bin       string
	dbURL     string
	logDir    string
	env       []string
	keyFile   string
	lifetimes int
	server    *serverProcess
	api       string
}

// deploy makes a deployment writing to the cluster to, and starts its
// server.
func (c *conformance) deploy(t testing.TB, to kafkaconn.Config) *deployment {
	t.Helper()
	d := &deployment{t: t, c: c, to: to, bin: kmirrorBinary(t), dbURL: testdb.New(t), logDir: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			(&world{t: t, logDir: d.logDir}).keepLogs()
		}
	})
	// Source passwords are stored sealed (secrets are safe by default).
	var key [32]byte
	_, _ = rand.Read(key[:])
	d.keyFile = filepath.Join(d.logDir, "secret.key")
	if err := os.WriteFile(d.keyFile, []byte(hex.EncodeToString(key[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := *c
	dst.dst = to
	d.env = dst.serverEnv(t, d.logDir)
	d.start()
	return d
}

// start runs a new lifetime of the deployment's server, at the default
// lease timings, and waits until its API serves.
func (d *deployment) start() {
	d.t.Helper()
	d.lifetimes++
	d.server = startServerEnv(d.t, d.bin, d.logDir, d.lifetimes, "conformance", d.dbURL,
		strings.Join(d.to.BootstrapServers, ","), d.env,
		"--secret-key-file", d.keyFile, "--lease-ttl", "15s", "--lease-renew-interval", "5s", "--delivery-timeout", "3s")
	d.api = d.server.waitReady(30 * time.Second)
}

// call sends a request to the deployment's API and wants the status want.
func (d *deployment) call(method, path string, body, out any, want int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := apiCall(ctx, d.api, method, path, body, out, want); err != nil {
		d.t.Fatal(err)
	}
}

// createMirror creates mirror over the cluster from, with config.
func (d *deployment) createMirror(mirror string, from kafkaconn.Config, config map[string]string) {
	d.t.Helper()
	body := map[string]any{"name": mirror, "source": sourceSpec(from)}
	if len(config) > 0 {
		body["config"] = config
	}
	d.call(http.MethodPost, "/v1/mirrors", body, nil, http.StatusCreated)
	d.t.Cleanup(func() {
		// Removing the topics lifts the read-only ACLs kmirror put on the
		// destination; the topics themselves are deleted by the scenario
		// that made them. Best effort: a scenario may have removed them.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = apiCall(ctx, d.api, http.MethodPost, "/v1/mirrors/"+mirror+"/topics:remove?wait=30s", map[string]any{"topic": ".*"}, nil, http.StatusOK)
		_ = apiCall(ctx, d.api, http.MethodDelete, "/v1/mirrors/"+mirror+"?wait=30s", nil, nil, http.StatusNoContent)
	})
}

// partitionView is a partition as GET /v1/partitions shows it.
type partitionView struct {
	Partition                     int32   `json:"partition"`
	State                         string  `json:"state"`
	SourceOffset                  *int64  `json:"source_offset"`
	DestinationOffset             *int64  `json:"destination_offset"`
	Lag                           *int64  `json:"lag"`
	Error                         *string `json:"error"`
	LastMirroredSourceOffset      *int64  `json:"last_mirrored_source_offset"`
	LastMirroredDestinationOffset *int64  `json:"last_mirrored_destination_offset"`
}

func (d *deployment) partitions(mirror, topic string) []partitionView {
	d.t.Helper()
	var page struct {
		Partitions []partitionView `json:"partitions"`
	}
	d.call(http.MethodGet, "/v1/partitions?limit=1000&mirror="+url.QueryEscape(mirror)+"&topic="+url.QueryEscape(topic), nil, &page, http.StatusOK)
	return page.Partitions
}

// waitStates waits until every partition of topic is in state.
func (d *deployment) waitStates(mirror, topic string, partitions int32, state string, timeout time.Duration) {
	d.t.Helper()
	d.waitPartitions(mirror, topic, partitions, "every partition "+state, timeout,
		func(p partitionView) bool { return p.State == state })
}

// waitCaughtUp waits until every partition of topic is MIRRORING with lag
// 0 against a source end at or past from's ends now.
func (d *deployment) waitCaughtUp(mirror, topic string, from kafkaconn.Config, partitions int32, timeout time.Duration) {
	d.t.Helper()
	ends := topicEnds(d.t, from, topic)
	d.waitPartitions(mirror, topic, partitions, fmt.Sprintf("caught up with the source's ends %v", ends), timeout,
		func(p partitionView) bool {
			return p.State == "MIRRORING" && p.Lag != nil && *p.Lag == 0 && p.SourceOffset != nil && *p.SourceOffset >= ends[p.Partition]
		})
}

// waitPartitions waits until ok holds for as many of topic's partitions
// as it has, as describe shows them.
func (d *deployment) waitPartitions(mirror, topic string, partitions int32, what string, timeout time.Duration, ok func(partitionView) bool) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := d.partitions(mirror, topic)
		n := int32(0)
		for _, p := range last {
			if ok(p) {
				n++
			}
		}
		if n == partitions {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s/%s: not %s within %s: %s", mirror, topic, what, timeout, viewString(last))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func viewString(ps []partitionView) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n  p%d %s src=%s dst=%s lag=%s", p.Partition, p.State, optInt(p.SourceOffset), optInt(p.DestinationOffset), optInt(p.Lag))
		if p.Error != nil {
			fmt.Fprintf(&b, " error=%q", *p.Error)
		}
	}
	return b.String()
}

// topicEnds lists topic's end offsets on cl per partition.
func topicEnds(t testing.TB, cl kafkaconn.Config, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := kadm.NewClient(client(t, cl)).ListEndOffsets(ctx, topic)
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		t.Fatalf("list the ends of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// readAll reads every record of a partition; committed skips aborted
// transactions' records.
func readAll(t testing.TB, cl kafkaconn.Config, topic string, part int32, committed bool) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end := topicEnds(t, cl, topic)[part]
	rs, err := kafkaconn.ReadRecords(ctx, cl, topic, part, 0, end, 1<<30, committed)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// assertExact checks that every partition of topic on the destination
// holds the source's committed records, in order, each the same (key,
// value, timestamp, headers), and nothing else. It reads again for up to
// 10 s while they differ: a copy may still be on its way.
func assertExact(t testing.TB, from, to kafkaconn.Config, topic string, partitions int32) int {
	t.Helper()
	return assertExactAs(t, from, to, topic, topic, partitions)
}

// assertExactAs is assertExact for a destination topic named dstTopic
// (a mirror with a topic.name.prefix).
func assertExactAs(t testing.TB, from, to kafkaconn.Config, topic, dstTopic string, partitions int32) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		total, problem := 0, ""
		for p := range partitions {
			src, dst := readAll(t, from, topic, p, true), readAll(t, to, dstTopic, p, false)
			total += len(src)
			if len(src) != len(dst) {
				problem = fmt.Sprintf("%s/%d: %s", topic, p, describeMismatch(src, dst))
				break
			}
			for i := range src {
				if diff := recordDiff(src[i], dst[i]); diff != "" {
					problem = fmt.Sprintf("%s/%d: record %d (source offset %d, destination offset %d): %s",
						topic, p, i, src[i].Offset, dst[i].Offset, diff)
					break
				}
			}
			if problem != "" {
				break
			}
		}
		if problem == "" {
			return total
		}
		if time.Now().After(deadline) {
			t.Fatalf("the destination is not an exact copy: %s", problem)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// metricValue is the value of an unlabelled metric on a server's /metrics,
// "" when it is not there.
func metricValue(t testing.TB, api, name string) string {
	t.Helper()
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
