package preflight_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/kafka/preflight"
	"kmirror/internal/testing/testnet"
)

// grant is one permission kmirror's principal may be given.
type grant struct {
	resource kmsg.ACLResourceType
	name     string
	op       kmsg.ACLOperation
}

func (g grant) String() string { return fmt.Sprintf("%s %s on %s", g.op, g.name, g.resource) }

var (
	cluster = kmsg.ACLResourceTypeCluster
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	// Everything a mirror of orders needs of each cluster.
	sourceGrants = []grant{
		{cluster, "kafka-cluster", kmsg.ACLOperationDescribe},
		{topic, "orders", kmsg.ACLOperationDescribe},
		{topic, "orders", kmsg.ACLOperationRead},
		{topic, "orders", kmsg.ACLOperationDescribeConfigs},
		{group, "*", kmsg.ACLOperationDescribe},
	}
	destinationGrants = []grant{
		{cluster, "kafka-cluster", kmsg.ACLOperationDescribe},
		{cluster, "kafka-cluster", kmsg.ACLOperationAlter},
		{cluster, "kafka-cluster", kmsg.ACLOperationCreate},
		{cluster, "kafka-cluster", kmsg.ACLOperationIdempotentWrite},
		{cluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs},
		{topic, "orders", kmsg.ACLOperationWrite},
		{topic, "orders", kmsg.ACLOperationAlterConfigs},
		{group, "*", kmsg.ACLOperationRead},
	}
)

// clusterWith starts a SASL/PLAIN cluster with an authorizer, where
// kmirror is given grants and admin is a super user, and returns a client
// of each.
func clusterWith(t *testing.T, grants []grant, opts ...kfake.Opt) (kmirror, admin *kgo.Client) {
	t.Helper()
	var acls []kfake.ACL
	for _, g := range grants {
		acls = append(acls, kfake.ACL{Resource: g.resource, Name: g.name, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Operation: g.op, Allow: true})
	}
	c, err := kfake.NewCluster(append(opts, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin-secret"), kfake.User("PLAIN", "kmirror", "secret", acls...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	client := func(user, pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	return client("kmirror", "secret"), client("admin", "admin-secret")
}

// check runs both clusters' checks for orders, with the source's group
// app, and returns the rows that did not pass as cluster/check=status.
func check(t *testing.T, src, dst []grant) ([]string, []preflight.Result) {
	t.Helper()
	ctx := context.Background()
	srcCl, srcAdmin := clusterWith(t, src, kfake.SeedTopics(3, "orders"))
	if _, err := kadm.NewClient(srcAdmin).CommitOffsets(ctx, "app",
		kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	dstCl, dstAdmin := clusterWith(t, dst)
	denyInternal(t, dstAdmin)
	rows, topics, groups := preflight.Source(ctx, srcCl, []string{"orders"})
	rows = append(rows, preflight.Destination(ctx, dstCl, true, topics, groups, -1)...)
	var bad []string
	for _, r := range rows {
		if r.Status != preflight.Pass {
			bad = append(bad, fmt.Sprintf("%s/%s=%s", r.Cluster, r.Check, r.Status))
		}
	}
	return bad, rows
}

// denyInternal adds the ACL kmirror adds to keep its own topics its own.
func denyInternal(t *testing.T, admin *kgo.Client) {
	t.Helper()
	res, err := kadm.NewClient(admin).CreateACLs(context.Background(), kafkaconn.InternalTopicsACL())
	if err == nil && len(res) > 0 {
		err = res[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestInternalTopicsRow: until everyone but super users is denied writing
// kmirror's own topics, the row warns and says which ACL to add; a DENY of
// User:* on the topic, or on a prefix of it, passes.
func TestInternalTopicsRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	row := func(cl *kgo.Client) preflight.Result {
		for _, r := range preflight.Destination(ctx, cl, true, nil, nil, -1) {
			if r.Check == "kmirror's own topics" {
				return r
			}
		}
		t.Fatal("no row for kmirror's own topics")
		return preflight.Result{}
	}
	cl, admin := clusterWith(t, destinationGrants)
	if r := row(cl); r.Status != preflight.Warn || !strings.Contains(r.Detail, "__mirror_heartbeats, __mirror_state") ||
		!strings.Contains(r.Grant, "--deny-principal 'User:*' --operation Write --operation Delete --topic __mirror_ --resource-pattern-type prefixed") {
		t.Fatalf("without the ACL: %+v, want a warning naming both topics and the ACL to add", r)
	}
	res, err := kadm.NewClient(admin).CreateACLs(ctx, kadm.NewACLs().Topics("__mirror_heartbeats").
		ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite))
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if r := row(cl); r.Status != preflight.Warn || !strings.Contains(r.Detail, "may write __mirror_state if") {
		t.Fatalf("with only the heartbeats denied: %+v, want a warning naming __mirror_state alone", r)
	}
	denyInternal(t, admin)
	if r := row(cl); r.Status != preflight.Pass {
		t.Fatalf("with kmirror's ACL: %+v, want a pass", r)
	}
}

func without(gs []grant, drop ...grant) []grant {
	return slices.DeleteFunc(slices.Clone(gs), func(g grant) bool { return slices.Contains(drop, g) })
}

// TestEachMissingPermissionFailsItsRow: with every permission granted every
// check passes; with one taken away (or two, where one implies the
// other), exactly the rows that need it fail or warn, naming the grant.
func TestEachMissingPermissionFailsItsRow(t *testing.T) {
	t.Parallel()
	bad, rows := check(t, sourceGrants, destinationGrants)
	if len(bad) > 0 {
		t.Fatalf("with every permission: %v\n%s", bad, describe(rows))
	}
	cases := []struct {
		srcDrop, dstDrop []grant
		want             []string
	}{
		{srcDrop: []grant{sourceGrants[2]}, want: []string{"source/read topics=fail"}},
		{srcDrop: []grant{sourceGrants[1], sourceGrants[2], sourceGrants[3]}, want: []string{"source/describe topics=fail"}},
		{srcDrop: []grant{sourceGrants[3]}, want: []string{"source/describe topic configs=warn"}},
		{srcDrop: []grant{sourceGrants[0]}, want: []string{"source/list groups=warn", "source/describe ACLs=warn"}},
		{dstDrop: []grant{destinationGrants[2]}, want: []string{"destination/create topics=fail"}},
		{dstDrop: []grant{destinationGrants[1]}, want: []string{"destination/create and delete ACLs=fail"}},
		{dstDrop: []grant{destinationGrants[3], destinationGrants[5]},
			want: []string{"destination/idempotent write=fail", "destination/write topics=fail"}},
		{dstDrop: []grant{destinationGrants[6]}, want: []string{"destination/alter topic configs=warn"}},
		{dstDrop: []grant{destinationGrants[7]}, want: []string{"destination/write group offsets=warn"}},
		{dstDrop: []grant{destinationGrants[4]}, want: []string{"destination/replication factor and min.insync.replicas=warn"}},
	}
	for _, c := range cases {
		name := fmt.Sprint(append(slices.Clone(c.srcDrop), c.dstDrop...))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bad, rows := check(t, without(sourceGrants, c.srcDrop...), without(destinationGrants, c.dstDrop...))
			if !slices.Equal(bad, c.want) {
				t.Fatalf("without %s: %v, want %v\n%s", name, bad, c.want, describe(rows))
			}
			for _, r := range rows {
				if r.Status != preflight.Pass && r.Grant == "" {
					t.Errorf("%s/%s says %s without what to grant: %s", r.Cluster, r.Check, r.Status, r.Detail)
				}
			}
		})
	}
}

func describe(rows []preflight.Result) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %s %s: %s (%s) grant: %s\n", r.Cluster, r.Check, r.Status, r.Detail, r.Grant)
	}
	return b.String()
}

// TestMessageSizeBelowTheSource: a destination topic that takes smaller
// messages than its source fails the size check, naming both limits.
func TestMessageSizeBelowTheSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srcCl, srcAdmin := clusterWith(t, sourceGrants)
	dstCl, dstAdmin := clusterWith(t, destinationGrants)
	two := "2000000"
	if _, err := kadm.NewClient(srcAdmin).CreateTopic(ctx, 3, 1, map[string]*string{"max.message.bytes": &two}, "orders"); err != nil {
		t.Fatal(err)
	}
	small := "1000"
	if _, err := kadm.NewClient(dstAdmin).CreateTopic(ctx, 3, 1, map[string]*string{"max.message.bytes": &small}, "orders"); err != nil {
		t.Fatal(err)
	}
	rows, topics, groups := preflight.Source(ctx, srcCl, []string{"orders"})
	rows = append(rows, preflight.Destination(ctx, dstCl, true, topics, groups, -1)...)
	i := slices.IndexFunc(rows, func(r preflight.Result) bool { return r.Check == "message size limits" })
	if i < 0 || rows[i].Status != preflight.Fail || !strings.Contains(rows[i].Detail, "orders (1000 < 2000000)") {
		t.Fatalf("the size check: %+v\n%s", rows[max(i, 0)], describe(rows))
	}
	if preflight.Worst(rows) != preflight.Fail {
		t.Fatalf("worst %s, want fail", preflight.Worst(rows))
	}
}

// TestAuthorizerRowAgreesWithTheDataPlane: a destination that answers the
// ACL requests but lets kmirror in unauthenticated, naming no authorizer,
// cannot keep mirrored topics read-only; the authorizer row says so (warn),
// as the data plane reports read_only_enforced false there, instead of
// passing. With SASL and ACLs it passes.
func TestAuthorizerRowAgreesWithTheDataPlane(t *testing.T) {
	ctx := context.Background()
	plainCluster, err := kfake.NewCluster(kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plainCluster.Close)
	anon, err := kgo.NewClient(kgo.SeedBrokers(plainCluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(anon.Close)
	secured, _ := clusterWith(t, destinationGrants)
	// Brokers that name their authorizer decide, whatever the client:
	// named empty, none enforces ACLs, even for an authenticated client.
	namedNone, _ := clusterWith(t, destinationGrants, kfake.BrokerConfigs(map[string]string{"authorizer.class.name": ""}))
	for _, tc := range []struct {
		name          string
		cl            *kgo.Client
		authenticated bool
		want          preflight.Status
		detail        string
	}{
		{"unauthenticated", anon, false, preflight.Warn, "none that can tell kmirror from other clients"},
		{"SASL with ACLs", secured, true, preflight.Pass, "present"},
		{"SASL, brokers naming no authorizer", namedNone, true, preflight.Warn, "authorizer.class.name empty"},
	} {
		var row *preflight.Result
		rows := preflight.Destination(ctx, tc.cl, tc.authenticated, nil, nil, -1)
		for i := range rows {
			if rows[i].Check == "authorizer" {
				row = &rows[i]
			}
		}
		if row == nil || row.Status != tc.want || !strings.Contains(row.Detail, tc.detail) {
			t.Errorf("%s: authorizer row %+v, want %s with %q", tc.name, row, tc.want, tc.detail)
		}
	}
}

// TestUnreachableBrokerReadsTheSame: the rows a check gives for a broker
// that cannot be spoken to read the same whatever is at its address (a
// closed port, no answer, a web server, a database, noise): a source's
// advertised addresses are its own to choose, and rows that told these
// apart would scan them for whoever sets them.
func TestUnreachableBrokerReadsTheSame(t *testing.T) {
	got := map[string]string{}
	for name, addr := range testnet.NotKafka(t) {
		cl, err := kgo.NewClient(append(kafkaconn.ProbeOpts(time.Second), kgo.SeedBrokers(addr))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		src, _, _ := preflight.Source(ctx, cl, []string{"orders"})
		dst := preflight.Destination(ctx, cl, false, []preflight.Topic{{Name: "orders", Partitions: 1}}, nil, 1)
		cancel()
		cl.Close()
		var rows []string
		for _, r := range append(src, dst...) {
			rows = append(rows, fmt.Sprintf("%s %s %s: %s", r.Cluster, r.Check, r.Status, r.Detail))
		}
		got[name] = strings.ReplaceAll(strings.Join(rows, "\n"), addr, "ADDR")
	}
	want := got["closed port"]
	if !strings.Contains(want, "cannot reach broker ADDR") {
		t.Fatalf("closed port's rows do not say the broker cannot be reached:\n%s", want)
	}
	for name, rows := range got {
		if rows != want {
			t.Errorf("%s's rows:\n%s\nwant the closed port's:\n%s", name, rows, want)
		}
	}
}
