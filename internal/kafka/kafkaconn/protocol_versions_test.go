package kafkaconn_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"kmirror/internal/kafka/kafkaconn"
)

// BrokerVersions are the Apache Kafka versions of the broker-version
// matrix: docs/conformance.md's table has a column for each, and .ci/run
// runs the conformance suite and the data plane's scenarios against kfake
// speaking like each (KMIRROR_TEST_KAFKA_VERSION).
var brokerVersions = []string{"2.8", "3.0", "3.6", "3.9", "4.4"}

// wantVersion is what kgo sends a broker of version bv for key under
// kmirror's cap: the lower of the two maxima, -1 when the broker has no
// such request.
func wantVersion(bv *kversion.Versions, key kmsg.Key) int16 {
	b, ok := bv.LookupMaxKeyVersion(int16(key))
	if !ok || b < 0 {
		return -1
	}
	c, _ := kafkaconn.ProtocolVersions().LookupMaxKeyVersion(int16(key))
	return min(b, c)
}

// versionTable is docs/conformance.md's table of request versions.
func versionTable() string {
	var b strings.Builder
	b.WriteString("| request | what kmirror sends it for |")
	for _, v := range brokerVersions {
		fmt.Fprintf(&b, " Kafka %s |", v)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(brokerVersions)) + "\n")
	for _, r := range kafkaconn.Requests {
		fmt.Fprintf(&b, "| %s (%d) | %s |", r.Key.Name(), r.Key, r.For)
		for _, v := range brokerVersions {
			if w := wantVersion(kversion.FromString(v), r.Key); w < 0 {
				b.WriteString(" none |")
			} else {
				fmt.Fprintf(&b, " v%d |", w)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

const (
	tableStart = "<!-- request versions: TestRequestVersions writes this table (KMIRROR_UPDATE_DOCS=1) -->\n"
	tableEnd   = "<!-- end of request versions -->"
)

// TestRequestVersionsTable: docs/conformance.md lists, for each broker
// version of the matrix, the version of every request kmirror sends, as
// kgo picks it under kmirror's cap. An upgrade of franz-go cannot move a
// wire version without this test, and the cap, changing.
// KMIRROR_UPDATE_DOCS=1 rewrites the table.
func TestRequestVersionsTable(t *testing.T) {
	const path = "../../../docs/conformance.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, tableStart), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no request versions table between %q and %q", path, tableStart, tableEnd)
	}
	want := versionTable()
	if got := doc[i+len(tableStart) : j]; got != want {
		if os.Getenv("KMIRROR_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(doc[:i+len(tableStart)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("%s's request versions are out of date (KMIRROR_UPDATE_DOCS=1 rewrites them); want:\n%s", path, want)
	}
}

// TestRequestVersions: a client made by kafkaconn sends each request
// kmirror uses at the table's version to a kfake broker speaking like
// each Kafka version of the matrix (or at kfake's own highest, where kfake
// implements less), and does not send one the broker lacks.
func TestRequestVersions(t *testing.T) {
	t.Parallel()
	latest, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	kfakeMax := kversion.FromApiVersionsResponse(apiVersions(t, latest))
	latest.Close()
	for _, name := range brokerVersions {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bv := kversion.FromString(name)
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(bv))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var mu sync.Mutex
			seen := map[int16]int16{}
			c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				mu.Lock()
				seen[req.Key()] = req.GetVersion()
				mu.Unlock()
				return nil, nil, false
			})
			cl, err := kafkaconn.Config{BootstrapServers: c.ListenAddrs()}.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for _, r := range kafkaconn.Requests {
				if r.Key == kmsg.SASLHandshake || r.Key == kmsg.SASLAuthenticate {
					continue // sent by kgo on SASL connections only
				}
				req := kmsg.RequestForKey(int16(r.Key))
				_, _ = cl.Broker(0).Request(t.Context(), req) // errors in the answer do not matter here
				mu.Lock()
				got, sent := seen[int16(r.Key)]
				mu.Unlock()
				want := wantVersion(bv, r.Key)
				if k, ok := kfakeMax.LookupMaxKeyVersion(int16(r.Key)); ok && want > k {
					want = k
				}
				switch {
				case want < 0 && sent:
					t.Errorf("%s: sent at v%d to a broker without it", r.Key.Name(), got)
				case want >= 0 && (!sent || got != want):
					t.Errorf("%s: sent %v at v%d, want v%d", r.Key.Name(), sent, got, want)
				}
			}
		})
	}
}

// apiVersions asks c which versions it takes.
func apiVersions(t *testing.T, c *kfake.Cluster) *kmsg.ApiVersionsResponse {
	t.Helper()
	cl, err := kafkaconn.Config{BootstrapServers: c.ListenAddrs()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
