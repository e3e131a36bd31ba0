package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/testdb"
)

// TestFanIn: two regions' clusters, east and west, each with a
// transactional topic orders (aborted transactions among its records), a
// group billing and an ACL on orders, mirrored into one destination by
// mirrors east and west with topic.name.prefix east. and west. (west also
// with group.name.prefix west.). Both copies are exact, side by side;
// the groups and ACLs follow the prefixed names; failing west.orders over
// leaves east.orders mirroring and read-only; and the whole control plane,
// restored from __mirror_state into an empty database, comes back as it
// was and goes on copying.
func TestFanIn(t *testing.T) {
	t.Parallel()
	east, west, dst := fanInCluster(t), fanInCluster(t), fanInCluster(t)
	const parts = 3
	c := &conformance{src: east, dst: dst, replicationFactor: -1}
	regions := []struct {
		name        string
		cl          kafkaconn.Config
		config      map[string]string
		topic       string // orders on the destination
		group       string // billing on the destination
		commit      map[int32]int64
		seq         int64
		transaction func(commit bool)
	}{
		{name: "east", cl: east, config: map[string]string{"topic.name.prefix": "east."},
			topic: "east.orders", group: "billing", commit: map[int32]int64{0: 12, 1: 25, 2: 3}},
		{name: "west", cl: west, config: map[string]string{"topic.name.prefix": "west.", "group.name.prefix": "west."},
			topic: "west.orders", group: "west.billing", commit: map[int32]int64{0: 30, 1: 7, 2: 18}},
	}
	for i := range regions {
		r := &regions[i]
		createOn(t, r.cl, "orders", parts)
		r.transaction = transactions(t, r.cl, "orders", parts, 5, &r.seq)
		r.seq = produceRecords(t, r.cl, "orders", parts, r.seq, 20)
		r.transaction(true)
		r.transaction(false)
		r.transaction(true)
		mustCreateACLs(t, r.cl, kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).
			Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead))
		mustCreateACLs(t, r.cl, kadm.NewACLs().Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).
			Allow("User:bob").AllowHosts("*").Operations(kadm.OpDescribe))
	}

	d := c.deploy(t, dst)
	for i := range regions {
		r := &regions[i]
		d.createMirror(r.name, r.cl, r.config)
		var preview struct {
			Matches []struct {
				Topic            string `json:"topic"`
				DestinationTopic string `json:"destination_topic"`
			} `json:"matches"`
		}
		d.call(http.MethodPost, "/v1/mirrors/"+r.name+"/topics:add?dry_run=true", map[string]any{"topic": "orders"}, &preview, http.StatusOK)
		if len(preview.Matches) != 1 || preview.Matches[0].DestinationTopic != r.topic {
			t.Fatalf("%s: add's dry run matched %+v, want orders written to %s", r.name, preview.Matches, r.topic)
		}
		d.addTopic(r.name, "orders", r.cl, parts, nil)
	}
	for _, r := range regions {
		n := assertExactAs(t, r.cl, dst, "orders", r.topic, parts)
		t.Logf("%s: %d committed records copied exactly to %s", r.name, n, r.topic)
	}
	if names := destinationTopics(t, dst); slices.Contains(names, "orders") {
		t.Fatalf("the destination has a topic orders (%v): every copy should be under a prefix", names)
	}

	// Groups: each region's billing offsets, translated, on its prefixed
	// topic, under the destination group name.
	dstAdm := kadm.NewClient(client(t, dst))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, r := range regions {
		offsets := kadm.Offsets{}
		for p, o := range r.commit {
			offsets.AddOffset("orders", p, o, -1)
		}
		if err := kadm.NewClient(client(t, r.cl)).CommitAllOffsets(ctx, "billing", offsets); err != nil {
			t.Fatal(err)
		}
		want := map[int32]int64{}
		for p, o := range r.commit {
			var tr struct {
				DestinationOffset int64 `json:"destination_offset"`
			}
			d.call(http.MethodGet, "/v1/mirrors/"+r.name+"/topics/orders/partitions/"+strconv.Itoa(int(p))+
				"/translate?source_offset="+strconv.FormatInt(o, 10), nil, &tr, http.StatusOK)
			want[p] = tr.DestinationOffset
		}
		waitUntil(t, 2*time.Minute, r.name+"'s billing offsets on "+r.topic, func() bool {
			d.call(http.MethodPost, "/v1/mirrors/"+r.name+":sync", map[string]any{}, nil, http.StatusOK)
			got, err := dstAdm.FetchOffsets(ctx, r.group)
			if err != nil {
				return false
			}
			for p, o := range want {
				if at, ok := got.Lookup(r.topic, p); !ok || at.At != o {
					return false
				}
			}
			return true
		})
	}
	if got, err := dstAdm.FetchOffsets(ctx, "billing"); err != nil {
		t.Fatal(err)
	} else if _, ok := got.Lookup("west.orders", 0); ok {
		t.Fatalf("west's offsets were committed under group billing, not west.billing: %v", got)
	}

	// ACLs: LITERAL orders and PREFIXED ord, each under the mirror's
	// prefix; nothing under the source names.
	waitUntil(t, time.Minute, "the sources' ACLs under the prefixed names", func() bool {
		for _, r := range regions {
			prefix := strings.TrimSuffix(r.topic, "orders")
			if !hasACL(t, dst, "orders", kadm.ACLPatternLiteral, "User:alice", prefix) ||
				!hasACL(t, dst, "ord", kadm.ACLPatternPrefixed, "User:bob", prefix) {
				return false
			}
		}
		return true
	})
	if hasACL(t, dst, "orders", kadm.ACLPatternLiteral, "User:alice", "") {
		t.Fatal("the destination has alice's ACL on orders itself: the prefix was not applied")
	}

	// Failover of west.orders alone: it becomes writable, while
	// east.orders stays read-only and goes on mirroring.
	d.remove("west", "orders", parts)
	if readOnly(t, dst, "west.orders") {
		t.Fatal("west.orders is still read-only after its failover")
	}
	if !readOnly(t, dst, "east.orders") {
		t.Fatal("east.orders lost its read-only ACL when west.orders failed over")
	}
	produceRecords(t, dst, "west.orders", parts, 10_000, 2)
	regions[0].seq = produceRecords(t, east, "orders", parts, regions[0].seq, 15)
	regions[0].transaction(false)
	d.waitCaughtUp("east", "orders", east, parts, time.Minute)
	assertExactAs(t, east, dst, "orders", "east.orders", parts)

	// Restore: the control plane from __mirror_state into an empty
	// database, then a server on it.
	waitUntil(t, time.Minute, "the state published to __mirror_state", func() bool {
		return metricValue(t, d.api, "kmirror_outbox_unpublished_rows") == "0"
	})
	d.server.kill()
	d.dbURL = testdb.New(t)
	restore := exec.Command(d.bin, "restore", "--database-url", d.dbURL,
		"--destination-bootstrap", strings.Join(dst.BootstrapServers, ","))
	restore.Env = append(childEnv(), d.env...)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("kmirror restore: %v\n%s", err, out)
	}
	d.start()
	// __mirror_state carries no secret: the operator gives each source's
	// password again.
	for _, r := range regions {
		d.call(http.MethodPatch, "/v1/mirrors/"+r.name, map[string]any{
			"source": map[string]any{"sasl_password": r.cl.Security.SASLPassword}}, nil, http.StatusOK)
	}
	for _, want := range []struct{ mirror, desired, dest string }{
		{"east", "mirroring", "east.orders"}, {"west", "stopped", "west.orders"},
	} {
		var list struct {
			Topics []struct {
				Topic            string `json:"topic"`
				DestinationTopic string `json:"destination_topic"`
				DesiredState     string `json:"desired_state"`
			} `json:"topics"`
		}
		d.call(http.MethodGet, "/v1/mirrors/"+want.mirror+"/topics", nil, &list, http.StatusOK)
		topics := list.Topics
		if len(topics) != 1 || topics[0].Topic != "orders" || topics[0].DestinationTopic != want.dest || topics[0].DesiredState != want.desired {
			t.Fatalf("after the restore, mirror %s has topics %+v, want orders → %s, %s", want.mirror, topics, want.dest, want.desired)
		}
	}
	regions[0].seq = produceRecords(t, east, "orders", parts, regions[0].seq, 10)
	d.waitCaughtUp("east", "orders", east, parts, 2*time.Minute)
	n := assertExactAs(t, east, dst, "orders", "east.orders", parts)
	t.Logf("after the restore: east.orders exact at %d records, west.orders failed over and writable", n)
}

// fanInCluster starts a one-broker kfake cluster with SASL/SCRAM and ACLs,
// as the conformance suite's, closed when the test ends.
func fanInCluster(t *testing.T) kafkaconn.Config {
	t.Helper()
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser(conformanceMech, conformanceUser, conformancePassKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kafkaconn.Config{BootstrapServers: cl.ListenAddrs(), Security: kafkaconn.Security{
		Protocol: "SASL_PLAINTEXT", SASLMechanism: conformanceMech,
		SASLUsername: conformanceUser, SASLPassword: conformancePassKey}}
}

func createOn(t *testing.T, cl kafkaconn.Config, topic string, parts int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(client(t, cl)).CreateTopic(ctx, parts, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

func mustCreateACLs(t *testing.T, cl kafkaconn.Config, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(client(t, cl)).CreateACLs(ctx, b)
	for _, r := range res {
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
}

// hasACL says whether cl has an ACL for principal on the topic resource
// prefix+name with the pattern type.
func hasACL(t *testing.T, cl kafkaconn.Config, name string, pattern kadm.ACLPattern, principal, prefix string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(client(t, cl)).DescribeACLs(ctx, kadm.NewACLs().Topics(prefix+name).
		ResourcePatternType(pattern).Allow(principal).AllowHosts().Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if len(r.Described) > 0 {
			return true
		}
	}
	return false
}

// readOnly says whether topic has kmirror's read-only ACL (deny writes to
// everyone) on cl.
func readOnly(t *testing.T, cl kafkaconn.Config, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(client(t, cl)).DescribeACLs(ctx, kadm.NewACLs().Topics(topic).
		ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:*").DenyHosts().Operations(kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if len(r.Described) > 0 {
			return true
		}
	}
	return false
}

func destinationTopics(t *testing.T, cl kafkaconn.Config) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := kadm.NewClient(client(t, cl)).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return td.Names()
}
