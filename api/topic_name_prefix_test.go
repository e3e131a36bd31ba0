package api_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kmirror/api"
	"kmirror/service"
)

// createPrefixed creates a mirror of source whose topics are written under
// prefix on the destination.
func (e *env) createPrefixed(t *testing.T, name, source, prefix string) {
	t.Helper()
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": name,
		"source": map[string]any{"bootstrap_servers": source},
		"config": map[string]string{"topic.name.prefix": prefix}}), http.StatusCreated, nil)
}

// TestTopicNamePrefix: a mirror with topic.name.prefix east. adds orders as
// east.orders (the dry run says so, and stores nothing); a mirror without
// a prefix mirrors orders of another source beside it, while a second
// mirror with the same prefix is refused with a 409 naming east.orders.
// The topic list, the topic's detail, describe, a remove's preview, a
// wait, translation and the events show both names.
func TestTopicNamePrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other, err := kfake.NewCluster(kfake.SeedTopics(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	otherSource := strings.Join(other.ListenAddrs(), ",")
	e.createPrefixed(t, "east", e.bootstrap, "east.")

	before := e.snapshot(t)
	var res api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/east/topics:add?dry_run=true", map[string]any{"topic": "orders|payments"}), http.StatusOK, &res)
	want := []api.TopicMatch{{Topic: "orders", DestinationTopic: "east.orders", Partitions: 3},
		{Topic: "payments", DestinationTopic: "east.payments", Partitions: 1}}
	if !reflect.DeepEqual(res.Matches, want) {
		t.Fatalf("dry run matches %+v, want %+v", res.Matches, want)
	}
	e.unchanged(t, before)

	// A real add answers the same names, and waits with them.
	ok(t, e.do(t, "POST", "/v1/mirrors/east/topics:add?wait=0s", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if !reflect.DeepEqual(res.Matches, want[:1]) || res.Wait == nil || len(res.Wait.Topics) != 1 ||
		res.Wait.Topics[0].Topic != "orders" || res.Wait.Topics[0].DestinationTopic != "east.orders" {
		t.Fatalf("add: %+v (wait %+v)", res, res.Wait)
	}
	var dest string
	if err := e.pool.QueryRow(t.Context(), `SELECT dest_topic FROM mirror_topics WHERE mirror = 'east' AND topic = 'orders'`).Scan(&dest); err != nil || dest != "east.orders" {
		t.Fatalf("stored destination name %q (%v), want east.orders", dest, err)
	}

	// Another source's orders, unprefixed, is another destination topic.
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "plain",
		"source": map[string]any{"bootstrap_servers": otherSource}}), http.StatusCreated, nil)
	ok(t, e.do(t, "POST", "/v1/mirrors/plain/topics:add", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if len(res.Matches) != 1 || res.Matches[0].DestinationTopic != "orders" {
		t.Fatalf("unprefixed add: %+v", res.Matches)
	}

	// The same prefix would write east.orders a second time: refused,
	// naming the destination topic and its writer, dry run or not.
	e.createPrefixed(t, "east2", otherSource, "east.")
	before = e.snapshot(t)
	for _, path := range []string{"/v1/mirrors/east2/topics:add?dry_run=true", "/v1/mirrors/east2/topics:add"} {
		p := wantProblem(t, e.do(t, "POST", path, map[string]any{"topic": "orders"}), http.StatusConflict, "conflict",
			"east.orders", "mirror east")
		if len(p.Topics) != 1 || p.Topics[0] != (api.TopicState{Topic: "orders", MirroredBy: "east", DestinationTopic: "east.orders"}) {
			t.Fatalf("%s: conflict topics %+v", path, p.Topics)
		}
	}
	e.unchanged(t, before)

	// The topic list and the topic's detail.
	var list api.TopicList
	ok(t, e.do(t, "GET", "/v1/mirrors/east/topics", nil), http.StatusOK, &list)
	if len(list.Topics) != 1 || list.Topics[0].Topic != "orders" || list.Topics[0].DestinationTopic != "east.orders" {
		t.Fatalf("topic list %+v", list.Topics)
	}
	var detail api.TopicDetail
	ok(t, e.do(t, "GET", "/v1/mirrors/east/topics/orders", nil), http.StatusOK, &detail)
	if detail.DestinationTopic != "east.orders" || len(detail.PartitionRows) != 3 {
		t.Fatalf("topic detail %+v", detail)
	}
	for _, r := range detail.PartitionRows {
		if r.Topic != "orders" || r.DestinationTopic != "east.orders" {
			t.Fatalf("detail row %+v", r)
		}
	}
	// Describe, over both mirrors: each row its own mirror's name.
	var rows api.PartitionList
	ok(t, e.do(t, "GET", "/v1/partitions?topic=orders", nil), http.StatusOK, &rows)
	got := map[string]int{}
	for _, r := range rows.Partitions {
		got[r.Mirror+":"+r.Topic+"→"+r.DestinationTopic]++
	}
	if !reflect.DeepEqual(got, map[string]int{"east:orders→east.orders": 3, "plain:orders→orders": 2}) {
		t.Fatalf("describe rows by name %v", got)
	}

	// Translation answers in the destination topic.
	e.exec(t, `INSERT INTO offset_map_runs (mirror, topic, partition, src_start, dst_start, count) VALUES ('east', 'orders', 0, 0, 0, 5)`)
	var tr api.Translation
	ok(t, e.do(t, "GET", "/v1/mirrors/east/topics/orders/partitions/0/translate?source_offset=3", nil), http.StatusOK, &tr)
	if tr != (api.Translation{DestinationTopic: "east.orders", SourceOffset: 3, DestinationOffset: 3, Exact: true}) {
		t.Fatalf("translation %+v", tr)
	}

	// A remove's preview says which destination topic becomes writable.
	ok(t, e.do(t, "POST", "/v1/mirrors/east/topics:remove?dry_run=true", map[string]any{"topic": "orders"}), http.StatusOK, &res)
	if len(res.Failover) != 1 || res.Failover[0].Topic != "orders" || res.Failover[0].DestinationTopic != "east.orders" {
		t.Fatalf("remove preview %+v", res.Failover)
	}

	// Events about a partition carry the destination name, in the header
	// and in the data.
	e.exec(t, `UPDATE mirror_partitions SET lease_owner = 'kmirror-0', lease_epoch = 3, lease_session = 1
		WHERE mirror = 'east' AND topic = 'orders' AND partition = 0`)
	if _, err := e.workers.TransitionPartition(t.Context(), service.PartitionTransition{Mirror: "east", Topic: "orders",
		Partition: 0, Owner: "kmirror-0", Epoch: 3, From: service.StateUnknown, To: service.StatePreparing, Reason: "lease acquired"}); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range readSSE(t, e, "?since=0&mirror=east", "", 3) {
		if m.event == service.EventTopicsAdded && !strings.Contains(m.data, "added 1 topic(s) to mirror east: [orders → east.orders]") {
			t.Errorf("the add's event does not name the destination topic: %s", m.data)
		}
		if m.event != service.EventPartitionState {
			if strings.Contains(m.data, "destination_topic") {
				t.Errorf("an event without a topic names a destination topic: %s", m.data)
			}
			continue
		}
		var ev api.PartitionStateEvent
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Topic != "orders" || ev.DestinationTopic != "east.orders" || ev.Data.DestinationTopic != "east.orders" {
			t.Fatalf("partition event %s", m.data)
		}
		found = true
	}
	if !found {
		t.Fatal("no partition.state event on the stream")
	}
}

// TestTopicNamePrefixFixed: topic.name.prefix may change while a mirror
// has no topics, and not once it has one (stopped ones too); a prefix
// that no topic name could start with is a 400.
func TestTopicNamePrefixFixed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createPrefixed(t, "m1", e.bootstrap, "east.")
	patch := func(prefix any) response {
		return e.do(t, "PATCH", "/v1/mirrors/m1", map[string]any{"config": map[string]any{"topic.name.prefix": prefix}})
	}
	var m api.Mirror
	ok(t, patch("west."), http.StatusOK, &m)
	if m.Config["topic.name.prefix"] != "west." {
		t.Fatalf("config after the change: %v", m.Config)
	}

	e.topicsAction(t, "m1", "add", "orders")
	e.topicsAction(t, "m1", "remove", "orders")
	before := e.snapshot(t)
	wantProblem(t, patch("north."), http.StatusConflict, "conflict", "topic.name.prefix", "west.orders")
	wantProblem(t, patch(nil), http.StatusConflict, "conflict", "topic.name.prefix")
	wantProblem(t, e.do(t, "PATCH", "/v1/mirrors/m1?dry_run=true", map[string]any{
		"config": map[string]any{"topic.name.prefix": "north."}}), http.StatusConflict, "conflict", "topic.name.prefix")
	e.unchanged(t, before)
	// Setting it to what it is changes nothing, and is no conflict.
	ok(t, patch("west."), http.StatusOK, nil)

	for _, bad := range []string{"a b", "__x", strings.Repeat("p", service.MaxNamePrefix+1), "é.", "é🙂."} {
		p := wantProblem(t, patch(bad), http.StatusBadRequest, "validation")
		if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Field, "topic.name.prefix") {
			t.Fatalf("PATCH %q: errors %+v", bad, p.Errors)
		}
		if !utf8.ValidString(p.Errors[0].Message) || strings.ContainsRune(p.Errors[0].Message, 'Ã') {
			t.Fatalf("PATCH %q: message %q garbles the character", bad, p.Errors[0].Message)
		}
		p = wantProblem(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "m2",
			"source": map[string]any{"bootstrap_servers": e.bootstrap},
			"config": map[string]string{"topic.name.prefix": bad}}), http.StatusBadRequest, "validation")
		if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Field, "topic.name.prefix") {
			t.Fatalf("create with %q: errors %+v", bad, p.Errors)
		}
	}
	// The longest prefix is taken; a topic it makes too long is refused.
	e.createPrefixed(t, "long", e.bootstrap, strings.Repeat("p", service.MaxNamePrefix))
	ok(t, e.do(t, "POST", "/v1/mirrors/long/topics:add?dry_run=true", map[string]any{"topic": "orders"}), http.StatusOK, nil)
}

// TestAddRefusesADestinationTopicWithRecords: an add whose destination
// topic already holds records this mirror did not write is refused by the
// preflight (its partitions would go FAILED), dry run or not, unless it
// asks to continue or recreate; an empty one is taken as it is, and a
// topic this mirror wrote passes its own check.
func TestAddRefusesADestinationTopicWithRecords(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOpts{destinationIsSource: true, preflight: service.KafkaPreflight()})
	adm := kadm.NewClient(func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.bootstrap, ",")...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}())
	if _, err := adm.CreateTopics(t.Context(), 1, 1, nil, "east.orders", "east.payments"); err != nil {
		t.Fatal(err)
	}
	e.produceAt(t, "east.orders", 0, stamps(time.Now(), 2), "", false)
	e.createPrefixed(t, "east", e.bootstrap, "east.")

	before := e.snapshot(t)
	for _, path := range []string{"/v1/mirrors/east/topics:add?dry_run=true", "/v1/mirrors/east/topics:add"} {
		p := wantProblem(t, e.do(t, "POST", path, map[string]any{"topic": "orders|payments"}), http.StatusConflict,
			"preflight-failed", "east.orders already holds records")
		if len(p.Checks) != 1 || p.Checks[0].Check != "existing records" || strings.Contains(p.Checks[0].Detail, "east.payments") ||
			!strings.Contains(p.Checks[0].Grant, "recreate") {
			t.Fatalf("%s: failed checks %+v", path, p.Checks)
		}
	}
	e.unchanged(t, before)

	// The empty one is taken; recreate (it replaces the topic) passes the
	// check, dry run or not.
	e.topicsAction(t, "east", "add", "payments")
	// The dry run says what recreating would delete: the two records east
	// did not write (issue 45: it said nothing).
	var preview api.TopicsResult
	ok(t, e.do(t, "POST", "/v1/mirrors/east/topics:add?dry_run=true", map[string]any{"topic": "orders", "recreate": true}), http.StatusOK, &preview)
	if len(preview.Matches) != 1 || preview.Matches[0].ForeignRecords == nil || *preview.Matches[0].ForeignRecords != 2 {
		t.Fatalf("recreate dry run: matches %+v, want orders with 2 foreign records", preview.Matches)
	}
	ok(t, e.do(t, "POST", "/v1/mirrors/east/topics:add", map[string]any{"topic": "orders", "recreate": true}), http.StatusOK, nil)

	// Once the mirror has it, its records are this mirror's: the check of
	// the mirror's own topics passes.
	var check service.CheckResult
	ok(t, e.do(t, "POST", "/v1/mirrors/east:check", nil), http.StatusOK, &check)
	for _, c := range check.Checks {
		if c.Check == "existing records" && c.Status != "pass" {
			t.Fatalf("the mirror's own topics: %+v", c)
		}
	}

	// While east writes east.orders, another mirror is refused for that,
	// not for the records: the conflict names the writer.
	e.createPrefixed(t, "back", e.bootstrap, "east.")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/back/topics:add", map[string]any{"topic": "orders", "recreate": true}),
		http.StatusConflict, "conflict", "east.orders", "mirror east")
	// Once east stopped, another mirror writing east.orders would fail on
	// its records; with continue (a failback) it is taken.
	e.topicsAction(t, "east", "remove", "orders")
	wantProblem(t, e.do(t, "POST", "/v1/mirrors/back/topics:add", map[string]any{"topic": "orders"}), http.StatusConflict,
		"preflight-failed", "east.orders")
	ok(t, e.do(t, "POST", "/v1/mirrors/back/topics:add", map[string]any{"topic": "orders", "continue": true}), http.StatusOK, nil)
}
