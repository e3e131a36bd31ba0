package metadatasync_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/devenv/devcluster"
	"kmirror/internal/devenv/devregistry"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/service"
	"kmirror/workers/workertest"
)

// An order as its producers write it: version 1, then version 2 with a
// field that has a default, as a compatible evolution does.
type order struct {
	ID   int64  `avro:"id"`
	Item string `avro:"item"`
	Qty  int32  `avro:"qty"`
}

type orderV1 struct {
	ID   int64  `avro:"id"`
	Item string `avro:"item"`
}

const (
	orderV1Schema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	orderV2Schema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"},` +
		`{"name":"qty","type":"int","default":1}]}`
	// unrelatedSchema takes the source's first id, so the mirrored
	// subjects' ids are ones a destination would not pick by itself.
	unrelatedSchema = `{"type":"record","name":"Audit","fields":[{"name":"who","type":"string"}]}`
)

// newRegistry starts an in-memory registry, closed at cleanup, and a
// client for it.
func newRegistry(t *testing.T) (*devregistry.Registry, *sr.Client) {
	t.Helper()
	reg, err := devregistry.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	cl, err := schemaregistry.NewClient(schemaregistry.Config{URLs: []string{reg.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, cl
}

func registerAvro(t *testing.T, cl *sr.Client, subject, schema string) sr.SubjectSchema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("registering %s: %v", subject, err)
	}
	return ss
}

// produceAvro writes n orders, ids from first, encoded with sr.Serde as
// schema id's version, as a producer using the source registry does.
func produceAvro[T any](t *testing.T, env *engineEnv, topic string, id int, schema string, first, n int, make func(i int) T) {
	t.Helper()
	var serde sr.Serde
	parsed := avro.MustParse(schema)
	var zero T
	serde.Register(id, zero, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(parsed, v) }))
	var rs []*kgo.Record
	for i := first; i < first+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: serde.MustEncode(make(i))})
	}
	workertest.ProduceRecords(t, workertest.Plain(env.Clusters.SourceAddr()), rs...)
}

// waitVersion waits until the destination registry holds a subject's
// version with the id want.
func waitVersion(t *testing.T, cl *sr.Client, subject string, version, want int) {
	t.Helper()
	workertest.WaitFor(t, 20*time.Second, fmt.Sprintf("%s v%d id %d on the destination registry", subject, version, want), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ss, err := cl.SchemaByVersion(ctx, subject, version)
		if err != nil {
			return false, err.Error()
		}
		return ss.ID == want, fmt.Sprintf("id %d", ss.ID)
	})
}

// waitMode waits until a destination subject is in mode.
func waitMode(t *testing.T, cl *sr.Client, subject string, mode sr.Mode) {
	t.Helper()
	workertest.WaitFor(t, 20*time.Second, fmt.Sprintf("%s %s on the destination registry", subject, mode), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res := cl.Mode(ctx, subject)
		if res[0].Err != nil {
			return false, res[0].Err.Error()
		}
		return res[0].Mode == mode, res[0].Mode.String()
	})
}

// waitSchemaSync waits until the mirror's stored schema sync result
// satisfies cond.
func (env *engineEnv) waitSchemaSync(mirror, what string, cond func(*service.SchemaSyncResult) bool) *service.SchemaSyncResult {
	t := env.T
	t.Helper()
	var last *service.SchemaSyncResult
	workertest.WaitFor(t, 20*time.Second, "schema sync of "+mirror+": "+what, func() (bool, string) {
		res, err := env.Svc.SchemaSync(context.Background(), mirror)
		if err != nil {
			t.Fatal(err)
		}
		last = res
		return res != nil && cond(res), fmt.Sprintf("%+v", res)
	})
	return last
}

func subjectOf(res *service.SchemaSyncResult, destination string) (service.SchemaSubject, bool) {
	i := slices.IndexFunc(res.Subjects, func(s service.SchemaSubject) bool { return s.Destination == destination })
	if i < 0 {
		return service.SchemaSubject{}, false
	}
	return res.Subjects[i], true
}

// eventKinds lists the kinds of a mirror's events, in order.
func (env *engineEnv) eventKinds(mirror string) []string {
	env.T.Helper()
	evs, err := env.Svc.ListEvents(context.Background(), service.EventsFilter{Mirror: mirror})
	if err != nil {
		env.T.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// TestSchemasFollowTheData is the whole cycle with Avro records: the
// subjects of a mirrored topic reach the destination registry with their
// ids and stay READONLY while mirrored, a version added mid-stream follows
// within an interval, and after the failover the subject is READWRITE and
// a consumer of the destination decodes every record through the
// destination registry alone, to the values the producer wrote.
func TestSchemasFollowTheData(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	srcReg, srcCl := newRegistry(t)
	dstReg, dstCl := newRegistry(t)
	registerAvro(t, srcCl, "audit-value", unrelatedSchema)
	v1 := registerAvro(t, srcCl, "orders-value", orderV1Schema)
	produceAvro(t, env, "orders", v1.ID, orderV1Schema, 0, 40, func(i int) orderV1 {
		return orderV1{ID: int64(i), Item: fmt.Sprintf("item-%d", i)}
	})

	dcfg := schemaregistry.Config{URLs: []string{dstReg.URL()}}
	env.startSyncNode("i1", workertest.InstanceOpts{DestinationRegistry: &dcfg})
	env.syncCreateMirror("m1", "orders", service.SourceInput{SchemaRegistryURLs: []string{srcReg.URL()}},
		map[string]string{service.CfgSchemaSyncIntervalMs: "1000"})
	env.syncWaitTopic("m1", "orders", service.StateMirroring, 20*time.Second)

	waitVersion(t, dstCl, "orders-value", 1, v1.ID)
	waitMode(t, dstCl, "orders-value", sr.ModeReadOnly)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := dstCl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2Schema}); err == nil {
		t.Fatal("a producer registered a version on the destination while the topic is mirrored")
	}
	if _, err := dstCl.SchemaByVersion(ctx, "audit-value", 1); err == nil {
		t.Fatal("a subject of a topic not mirrored reached the destination")
	}

	// A new version mid-stream, and records that use it.
	v2 := registerAvro(t, srcCl, "orders-value", orderV2Schema)
	produceAvro(t, env, "orders", v2.ID, orderV2Schema, 40, 40, func(i int) order {
		return order{ID: int64(i), Item: fmt.Sprintf("item-%d", i), Qty: int32(i % 7)}
	})
	waitVersion(t, dstCl, "orders-value", 2, v2.ID)
	workertest.WaitMirrored(t, env.Env, "orders", 2, 30*time.Second)
	res := env.waitSchemaSync("m1", "orders-value's 2 versions READONLY", func(r *service.SchemaSyncResult) bool {
		s, ok := subjectOf(r, "orders-value")
		return r.OK && ok && s.Versions == 2 && s.Mode == service.SchemaModeReadOnly
	})
	if res.LastOKAt == nil {
		t.Fatalf("an OK result without last_ok_at: %+v", res)
	}

	// Failover.
	if _, err := env.Svc.RemoveTopics(ctx, "m1", "orders"); err != nil {
		t.Fatal(err)
	}
	env.syncWaitTopic("m1", "orders", service.StateStopped, 20*time.Second)
	waitMode(t, dstCl, "orders-value", sr.ModeReadWrite)
	opened := env.waitSchemaSync("m1", "orders-value READWRITE", func(r *service.SchemaSyncResult) bool {
		s, ok := subjectOf(r, "orders-value")
		return ok && s.Mode == service.SchemaModeReadWrite && s.Error == ""
	})
	// Later passes go on saying what the subject held when it opened, a
	// full one too (a change on the source, even a soft delete in a
	// subject not mirrored, makes the next pass full).
	if err := srcCl.DeleteSchema(ctx, "audit-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	env.waitSchemaSync("m1", "a later pass with orders-value's 2 versions, READWRITE", func(r *service.SchemaSyncResult) bool {
		s, _ := subjectOf(r, "orders-value")
		return r.FinishedAt.Sub(opened.FinishedAt) >= 2*time.Second && s.Versions == 2 && s.Mode == service.SchemaModeReadWrite
	})

	// Every record decodes through the destination registry alone, by the
	// id in its prefix, to what was produced; the ids are the source's.
	var header sr.ConfluentHeader
	var serde sr.Serde
	for _, id := range []int{v1.ID, v2.ID} {
		got, err := dstCl.SchemaByID(ctx, id)
		if err != nil {
			t.Fatalf("destination registry, id %d: %v", id, err)
		}
		want, _ := srcCl.SchemaByID(ctx, id)
		if got.Schema != want.Schema {
			t.Fatalf("id %d holds %q on the destination, %q on the source", id, got.Schema, want.Schema)
		}
		parsed := avro.MustParse(got.Schema)
		serde.Register(id, order{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(parsed, b, v) }))
	}
	seen := map[int64]bool{}
	for p := int32(0); p < 2; p++ {
		for _, r := range workertest.ReadAll(t, env.Clusters.DestinationAddr(), "orders", p, true) {
			id, _, err := header.DecodeID(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			var o order
			if err := serde.Decode(r.Value, &o); err != nil {
				t.Fatalf("record %s at %d/%d (schema id %d) does not decode on the destination: %v", r.Key, p, r.Offset, id, err)
			}
			wantQty := int32(0)
			if o.ID >= 40 {
				wantQty = int32(o.ID % 7)
			}
			if string(r.Key) != fmt.Sprintf("k%d", o.ID) || o.Item != fmt.Sprintf("item-%d", o.ID) || o.Qty != wantQty {
				t.Fatalf("record %s decoded to %+v", r.Key, o)
			}
			if (o.ID < 40) != (id == v1.ID) {
				t.Fatalf("record %s names schema id %d", r.Key, id)
			}
			seen[o.ID] = true
		}
	}
	if len(seen) != 80 {
		t.Fatalf("decoded %d distinct orders on the destination, want 80", len(seen))
	}

	// Producers on the destination may now register.
	v3, err := dstCl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: strings.Replace(orderV2Schema, `"default":1`, `"default":2`, 1)})
	if err != nil {
		t.Fatalf("registering on the destination after the failover: %v", err)
	}
	kinds := env.eventKinds("m1")
	for _, k := range []string{service.EventSchemasCopied, service.EventSchemasWritable} {
		if !slices.Contains(kinds, k) {
			t.Fatalf("no %s event: %v", k, kinds)
		}
	}

	// Failback: a deployment of its own mirrors the destination back into
	// the source, registries the other way round. Only the version the
	// destination's producers added is copied back, with its id; the two
	// the source had stay as they are.
	back := workertest.NewEnvOn(t, env.Clusters)
	back.T = t
	rcfg := schemaregistry.Config{URLs: []string{srcReg.URL()}}
	back.StartInstanceOpts("b1", workertest.InstanceOpts{Sync: true, DestinationRegistry: &rcfg,
		Dest: workertest.Plain(env.Clusters.SourceAddr())})
	if _, err := back.Svc.CreateMirror(ctx, service.MirrorInput{Name: "back", Config: map[string]string{service.CfgSchemaSyncIntervalMs: "1000"},
		Source: service.SourceInput{BootstrapServers: env.Clusters.DestinationAddr(), SchemaRegistryURLs: []string{dstReg.URL()}}},
		service.WriteOpts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := back.Svc.AddTopics(ctx, "back", service.AddTopicsInput{Topic: "orders", Continue: true}); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, srcCl, "orders-value", 3, v3.ID)
	waitMode(t, srcCl, "orders-value", sr.ModeReadOnly)
	backEnv := &engineEnv{back}
	res = backEnv.waitSchemaSync("back", "orders-value's 3 versions, one copied", func(r *service.SchemaSyncResult) bool {
		s, ok := subjectOf(r, "orders-value")
		return r.OK && ok && s.Versions == 3
	})
	copied := 0
	for _, e := range backEnv.events("back", service.EventSchemasCopied) {
		copied++
		if !strings.Contains(e, fmt.Sprintf("orders-value v3 id %d", v3.ID)) || strings.Contains(e, " v1 ") || strings.Contains(e, " v2 ") {
			t.Fatalf("the failback copied %q, want only v3 (id %d)", e, v3.ID)
		}
	}
	if copied != 1 {
		t.Fatalf("%d schemas.copied events on the failback, want 1", copied)
	}
}

// events returns the messages of a mirror's events of one kind.
func (env *engineEnv) events(mirror, kind string) []string {
	env.T.Helper()
	evs, err := env.Svc.ListEvents(context.Background(), service.EventsFilter{Mirror: mirror})
	if err != nil {
		env.T.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestSchemaSyncIDConflictAndRegistryRestart: a destination that already
// holds a mirrored id for another schema fails that subject's sync, names
// the id and both subjects, and overwrites nothing, while the records are
// still mirrored; a source registry that goes down fails the pass, and
// one that comes back is synced again.
func TestSchemaSyncIDConflictAndRegistryRestart(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	for _, topic := range []string{"orders", "clash"} {
		if err := env.Clusters.Source.CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	srcReg, srcCl := newRegistry(t)
	dstReg, dstCl := newRegistry(t)
	clash := registerAvro(t, srcCl, "clash-value", orderV1Schema)
	// The destination gives the same id to another schema of its own.
	local := registerAvro(t, dstCl, "local-value", unrelatedSchema)
	if local.ID != clash.ID {
		t.Fatalf("set-up: ids %d and %d should collide", local.ID, clash.ID)
	}
	produceAvro(t, env, "clash", clash.ID, orderV1Schema, 0, 10, func(i int) orderV1 { return orderV1{ID: int64(i)} })

	dcfg := schemaregistry.Config{URLs: []string{dstReg.URL()}}
	env.startSyncNode("i1", workertest.InstanceOpts{DestinationRegistry: &dcfg})
	env.syncCreateMirror("m1", "clash", service.SourceInput{SchemaRegistryURLs: []string{srcReg.URL()}},
		map[string]string{service.CfgSchemaSyncIntervalMs: "1000"})
	res := env.waitSchemaSync("m1", "clash-value failed", func(r *service.SchemaSyncResult) bool {
		s, ok := subjectOf(r, "clash-value")
		return ok && s.Error != ""
	})
	s, _ := subjectOf(res, "clash-value")
	if res.OK || !strings.Contains(s.Error, fmt.Sprint(clash.ID)) || !strings.Contains(s.Error, "local-value") ||
		!strings.Contains(s.Error, "clash-value") {
		t.Fatalf("the conflict's error should name id %d and both subjects: %+v", clash.ID, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := dstCl.SchemaByID(ctx, clash.ID); err != nil || got.Schema != local.Schema.Schema {
		t.Fatalf("id %d on the destination is now %q (%v), want the destination's own schema", clash.ID, got.Schema, err)
	}
	workertest.WaitMirrored(t, env.Env, "clash", 1, 30*time.Second)
	if !slices.Contains(env.eventKinds("m1"), service.EventSchemaSyncFailed) {
		t.Fatalf("no %s event: %v", service.EventSchemaSyncFailed, env.eventKinds("m1"))
	}

	// The source registry dies; the pass fails and says so.
	if _, err := env.Svc.RemoveTopics(ctx, "m1", "clash"); err != nil {
		t.Fatal(err)
	}
	env.syncWaitTopic("m1", "clash", service.StateStopped, 20*time.Second)
	srcReg.Stop()
	env.waitSchemaSync("m1", "failing while the source registry is down", func(r *service.SchemaSyncResult) bool {
		return !r.OK
	})
	if err := srcReg.Start(); err != nil {
		t.Fatal(err)
	}
	// Another schema than clash-value's: the same one would share its id.
	v1 := registerAvro(t, srcCl, "orders-value", orderV2Schema)
	if _, err := env.Svc.AddTopics(ctx, "m1", service.AddTopicsInput{Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	env.waitSchemaSync("m1", "orders-value synced after the restart", func(r *service.SchemaSyncResult) bool {
		s, ok := subjectOf(r, "orders-value")
		return ok && s.Versions == 1 && s.Error == "" && s.Mode == service.SchemaModeReadOnly
	})
	waitVersion(t, dstCl, "orders-value", 1, v1.ID)
}

// TestSchemaSyncFanInContexts: two mirrors whose source registries gave
// the same id to different schemas write into a context each on one
// destination registry, where each keeps its ids apart from the other's.
func TestSchemaSyncFanInContexts(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	eastReg, eastCl := newRegistry(t)
	westReg, westCl := newRegistry(t)
	dstReg, dstCl := newRegistry(t)
	east := registerAvro(t, eastCl, "orders-value", orderV1Schema)
	west := registerAvro(t, westCl, "orders-value", orderV2Schema)
	if east.ID != west.ID {
		t.Fatalf("set-up: ids %d and %d should collide", east.ID, west.ID)
	}
	dcfg := schemaregistry.Config{URLs: []string{dstReg.URL()}}
	env.startSyncNode("i1", workertest.InstanceOpts{DestinationRegistry: &dcfg})
	for _, m := range []struct {
		name, ctx string
		reg       *devregistry.Registry
	}{{"east", ".east", eastReg}, {"west", ".west", westReg}} {
		env.syncCreateMirror(m.name, "orders", service.SourceInput{SchemaRegistryURLs: []string{m.reg.URL()}},
			map[string]string{service.CfgSchemaSyncIntervalMs: "1000", service.CfgSchemaRegistryContext: m.ctx,
				service.CfgTopicNamePrefix: m.name + "."})
	}
	waitVersion(t, dstCl, ":.east:east.orders-value", 1, east.ID)
	waitVersion(t, dstCl, ":.west:west.orders-value", 1, west.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for sub, want := range map[string]string{":.east:east.orders-value": east.Schema.Schema, ":.west:west.orders-value": west.Schema.Schema} {
		got, err := dstCl.SchemaByVersion(ctx, sub, 1)
		if err != nil || got.Schema.Schema != want {
			t.Fatalf("%s v1 is %q (%v), want %q", sub, got.Schema.Schema, err, want)
		}
	}
	for _, m := range []string{"east", "west"} {
		env.waitSchemaSync(m, "OK", func(r *service.SchemaSyncResult) bool { return r.OK })
	}
	var re *sr.ResponseError
	if _, err := dstCl.SchemaByVersion(ctx, "orders-value", 1); err == nil || !errors.As(err, &re) {
		t.Fatalf("the default context holds orders-value: %v", err)
	}
}

// TestSchemaSyncReferencesAndSoftDeletes: a referenced subject comes with
// the subjects that reference it, soft-deleted versions stay soft-deleted
// with their ids, and a failover opens a shared reference only once no
// mirrored topic needs it, and a subject the regex selects only once every
// topic was removed.
func TestSchemaSyncReferencesAndSoftDeletes(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	for _, topic := range []string{"orders", "payments"} {
		if err := env.Clusters.Source.CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	srcReg, srcCl := newRegistry(t)
	dstReg, dstCl := newRegistry(t)
	money := registerAvro(t, srcCl, "com.acme.Money", `{"type":"record","name":"Money","namespace":"com.acme","fields":[{"name":"cents","type":"long"}]}`)
	ref := []sr.SchemaReference{{Name: "com.acme.Money", Subject: "com.acme.Money", Version: money.Version}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	register := func(subject, schema string) sr.SubjectSchema {
		ss, err := srcCl.CreateSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro, References: ref})
		if err != nil {
			t.Fatalf("registering %s: %v", subject, err)
		}
		return ss
	}
	o1 := register("orders-value", `{"type":"record","name":"Order","fields":[{"name":"total","type":"com.acme.Money"}]}`)
	o2 := register("orders-value", `{"type":"record","name":"Order","fields":[{"name":"total","type":"com.acme.Money"},{"name":"note","type":"string","default":""}]}`)
	register("payments-value", `{"type":"record","name":"Payment","fields":[{"name":"amount","type":"com.acme.Money"}]}`)
	if err := srcCl.DeleteSchema(ctx, "orders-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	// A shared type no topic references, selected by the regex.
	registerAvro(t, srcCl, "com.acme.Audit", `{"type":"record","name":"Audit","namespace":"com.acme","fields":[{"name":"who","type":"string"}]}`)

	dcfg := schemaregistry.Config{URLs: []string{dstReg.URL()}}
	env.startSyncNode("i1", workertest.InstanceOpts{DestinationRegistry: &dcfg})
	env.syncCreateMirror("m1", "orders|payments", service.SourceInput{SchemaRegistryURLs: []string{srcReg.URL()}},
		map[string]string{service.CfgSchemaSyncIntervalMs: "1000", service.CfgSchemaSubjectsInclude: `com\.acme\.Audit`})
	waitVersion(t, dstCl, "com.acme.Money", 1, money.ID)
	waitVersion(t, dstCl, "orders-value", 2, o2.ID)
	if got, err := dstCl.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), "orders-value", 1); err != nil || got.ID != o1.ID {
		t.Fatalf("soft-deleted orders-value v1 on the destination: %+v, %v; want id %d", got, err, o1.ID)
	}
	if live, err := dstCl.SubjectVersions(ctx, "orders-value"); err != nil || !slices.Equal(live, []int{2}) {
		t.Fatalf("orders-value's live versions on the destination %v (%v), want [2]: v1 soft-deleted as on the source", live, err)
	}
	for _, sub := range []string{"com.acme.Money", "com.acme.Audit", "orders-value", "payments-value"} {
		waitMode(t, dstCl, sub, sr.ModeReadOnly)
	}

	// orders fails over: its subject opens, Money stays closed while
	// payments, still mirrored, references it.
	if _, err := env.Svc.RemoveTopics(ctx, "m1", "orders"); err != nil {
		t.Fatal(err)
	}
	waitMode(t, dstCl, "orders-value", sr.ModeReadWrite)
	env.waitSchemaSync("m1", "orders-value open, Money and payments-value closed", func(r *service.SchemaSyncResult) bool {
		o, _ := subjectOf(r, "orders-value")
		m, _ := subjectOf(r, "com.acme.Money")
		p, _ := subjectOf(r, "payments-value")
		return o.Mode == service.SchemaModeReadWrite && m.Mode == service.SchemaModeReadOnly && p.Mode == service.SchemaModeReadOnly
	})
	for _, sub := range []string{"com.acme.Money", "com.acme.Audit", "payments-value"} {
		if m := dstCl.Mode(ctx, sub)[0]; m.Err != nil || m.Mode != sr.ModeReadOnly {
			t.Fatalf("%s is %s (%v) while payments is mirrored, want READONLY", sub, m.Mode, m.Err)
		}
	}

	// payments fails over too: nothing needs Money closed any more.
	if _, err := env.Svc.RemoveTopics(ctx, "m1", "payments"); err != nil {
		t.Fatal(err)
	}
	waitMode(t, dstCl, "payments-value", sr.ModeReadWrite)
	waitMode(t, dstCl, "com.acme.Money", sr.ModeReadWrite)
	waitMode(t, dstCl, "com.acme.Audit", sr.ModeReadWrite)
}

// TestSchemaSyncSteadyPassesSpareTheRegistries: once the registries are in
// step, a pass reads two lists of the source's and nothing of the
// destination's, and a version registered after that is still copied at
// the next pass.
func TestSchemaSyncSteadyPassesSpareTheRegistries(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, devcluster.Config{})
	if err := env.Clusters.Source.CreateTopic("orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	srcReg, srcCl := newRegistry(t)
	dstReg, dstCl := newRegistry(t)
	registerAvro(t, srcCl, "orders-value", orderV1Schema)
	// The destination behind a proxy that counts what the sync asks of it.
	var dstRequests atomic.Int64
	target, err := url.Parse(dstReg.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dstRequests.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counted.Close)

	dcfg := schemaregistry.Config{URLs: []string{counted.URL}}
	env.startSyncNode("i1", workertest.InstanceOpts{DestinationRegistry: &dcfg})
	env.syncCreateMirror("m1", "orders", service.SourceInput{SchemaRegistryURLs: []string{srcReg.URL()}},
		map[string]string{service.CfgSchemaSyncIntervalMs: "1000"})
	first := env.waitSchemaSync("m1", "orders-value in step", func(r *service.SchemaSyncResult) bool {
		s, ok := subjectOf(r, "orders-value")
		return r.OK && ok && s.Versions == 1 && len(s.Copied) == 0
	})
	before := dstRequests.Load()
	var last *service.SchemaSyncResult
	env.waitSchemaSync("m1", "three more passes", func(r *service.SchemaSyncResult) bool {
		last = r
		return r.FinishedAt.Sub(first.FinishedAt) >= 3*time.Second
	})
	if n := dstRequests.Load() - before; n != 0 {
		t.Fatalf("%d requests to the destination registry over passes that had nothing to do", n)
	}
	if s, _ := subjectOf(last, "orders-value"); !last.OK || s.Mode != service.SchemaModeReadOnly || s.Versions != 1 {
		t.Fatalf("a steady pass's result %+v, want the subject in step", last)
	}

	v2 := registerAvro(t, srcCl, "orders-value", orderV2Schema)
	waitVersion(t, dstCl, "orders-value", 2, v2.ID)
}
