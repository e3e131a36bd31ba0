package preflight_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/internal/kafka/preflight"
)

// TestDestinationChecksUseDestinationNames: with a topic.name.prefix the
// destination's checks are about the destination names: a source topic
// orders written to east.orders is compared with east.orders' message size
// limit (not orders'), a missing east.payments is to be created, and
// east.orders holding records fails unless they are expected (this
// mirror's, or an add with continue or recreate); an existing empty topic
// passes.
func TestDestinationChecksUseDestinationNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var dstGrants []grant
	for _, g := range destinationGrants {
		if g.resource == topic {
			for _, name := range []string{"east.orders", "east.payments", "east.refunds"} {
				dstGrants = append(dstGrants, grant{g.resource, name, g.op})
			}
			continue
		}
		dstGrants = append(dstGrants, g)
	}
	var srcGrants []grant
	for _, g := range sourceGrants {
		srcGrants = append(srcGrants, g)
		if g.resource == topic {
			srcGrants = append(srcGrants, grant{g.resource, "payments", g.op}, grant{g.resource, "refunds", g.op})
		}
	}
	srcCl, srcAdmin := clusterWith(t, srcGrants)
	dstCl, dstAdmin := clusterWith(t, dstGrants)
	two, small := "2000000", "1000"
	if _, err := kadm.NewClient(srcAdmin).CreateTopic(ctx, 2, 1, map[string]*string{"max.message.bytes": &two}, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(srcAdmin).CreateTopics(ctx, 1, 1, nil, "payments", "refunds"); err != nil {
		t.Fatal(err)
	}
	// On the destination, orders' name is taken by a topic with smaller
	// messages and records; refunds' is taken by an empty one.
	dstAdm := kadm.NewClient(dstAdmin)
	if _, err := dstAdm.CreateTopic(ctx, 2, 1, map[string]*string{"max.message.bytes": &small}, "east.orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := dstAdm.CreateTopic(ctx, 1, 1, nil, "east.refunds"); err != nil {
		t.Fatal(err)
	}
	if err := dstAdmin.ProduceSync(ctx, &kgo.Record{Topic: "east.orders", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := func(expected bool) []preflight.Result {
		rows, found, groups := preflight.Source(ctx, srcCl, []string{"orders", "payments", "refunds"})
		if len(found) != 3 {
			t.Fatalf("source found %+v\n%s", found, describe(rows))
		}
		for i := range found {
			found[i].Destination, found[i].RecordsExpected = "east."+found[i].Name, expected
		}
		return append(rows, preflight.Destination(ctx, dstCl, true, found, groups, -1)...)
	}
	row := func(rows []preflight.Result, check string) preflight.Result {
		t.Helper()
		i := slices.IndexFunc(rows, func(r preflight.Result) bool { return r.Cluster == "destination" && r.Check == check })
		if i < 0 {
			t.Fatalf("no destination %q row\n%s", check, describe(rows))
		}
		return rows[i]
	}
	rows := run(false)
	if r := row(rows, "message size limits"); r.Status != preflight.Fail || !strings.Contains(r.Detail, "east.orders (1000 < 2000000)") {
		t.Errorf("the size check: %+v", r)
	}
	if r := row(rows, "create topics"); r.Status != preflight.Pass || r.Detail != "1 topic(s) to create: allowed" {
		t.Errorf("the create check (east.payments only): %+v", r)
	}
	if r := row(rows, "write topics"); r.Status != preflight.Pass {
		t.Errorf("the write check (WRITE granted on the east. names only): %+v", r)
	}
	if r := row(rows, "existing records"); r.Status != preflight.Fail || !strings.HasPrefix(r.Detail, "east.orders already holds records") ||
		strings.Contains(r.Detail, "refunds") || r.Grant == "" {
		t.Errorf("the records check: %+v", r)
	}
	if r := row(run(true), "existing records"); r.Status != preflight.Pass {
		t.Errorf("the records check with the records expected: %+v", r)
	}
}
