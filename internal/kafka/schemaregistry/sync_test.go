package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// record returns an Avro record schema with the given string fields.
func record(name string, fields ...string) string {
	var fs []string
	for _, f := range fields {
		fs = append(fs, fmt.Sprintf(`{"name":%q,"type":"string"}`, f))
	}
	return fmt.Sprintf(`{"type":"record","name":%q,"fields":[%s]}`, name, strings.Join(fs, ","))
}

func avro(text string, refs ...sr.SchemaReference) sr.Schema {
	return sr.Schema{Schema: text, Type: sr.TypeAvro, References: refs}
}

// newSource returns a source registry and a client for it.
func newSource(t *testing.T) (*srfake.Registry, *sr.Client) {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := NewClient(Config{URLs: []string{reg.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, cl
}

func mustSync(t *testing.T, src, dst *sr.Client, sel Selection) *Report {
	t.Helper()
	rep, err := Sync(context.Background(), src, dst, sel)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return rep
}

// version reads one version from a registry over HTTP, soft-deleted ones
// included.
func version(t *testing.T, cl *sr.Client, subject string, v int) sr.SubjectSchema {
	t.Helper()
	ss, err := cl.SchemaByVersion(sr.WithParams(context.Background(), sr.ShowDeleted), subject, v)
	if err != nil {
		t.Fatalf("reading %s version %d: %v", subject, v, err)
	}
	return ss
}

func versions(t *testing.T, cl *sr.Client, subject string, deleted bool) []int {
	t.Helper()
	ctx := context.Background()
	if deleted {
		ctx = sr.WithParams(ctx, sr.ShowDeleted)
	}
	vs, err := cl.SubjectVersions(ctx, subject)
	if isCode(err, sr.ErrSubjectNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("listing %s: %v", subject, err)
	}
	slices.Sort(vs)
	return vs
}

func mode(t *testing.T, cl *sr.Client, subject string) sr.Mode {
	t.Helper()
	m, err := readMode(context.Background(), cl, subject)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// subjectReport finds a subject's part of a report.
func subjectReport(t *testing.T, rep *Report, source string) SubjectReport {
	t.Helper()
	for _, s := range rep.Subjects {
		if s.Source == source {
			return s
		}
	}
	t.Fatalf("report has no subject %q: %+v", source, rep.Subjects)
	return SubjectReport{}
}

func TestSyncCopiesSubjectWithIDsAndVersions(t *testing.T) {
	srcReg, src := newSource(t)
	// Ids far from 1 and apart, so a registry numbering them itself would
	// show.
	srcReg.SeedSchema("orders-value", 1, 101, avro(record("Order", "id")))
	srcReg.SeedSchema("orders-value", 2, 105, avro(record("Order", "id", "note")))
	dest := newDestination(t)
	dest.Context("").SeedSchema("unrelated-value", 1, 1, avro(record("Other", "x")))
	dst := clientFor(t, dest)
	sel := Selection{Topics: []string{"orders"}}

	plan, err := PlanSync(context.Background(), src, dst, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Subjects) != 1 || len(plan.Subjects[0].Copy) != 2 {
		t.Fatalf("plan = %+v, want one subject with two versions to copy", plan.Subjects)
	}
	if got := versions(t, dst, "orders-value", true); got != nil {
		t.Fatalf("planning wrote versions %v", got)
	}

	rep := plan.Apply(context.Background())
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	for v, id := range map[int]int{1: 101, 2: 105} {
		got, want := version(t, dst, "orders-value", v), version(t, src, "orders-value", v)
		if got.ID != id || got.Schema.Schema != want.Schema.Schema {
			t.Errorf("destination version %d = id %d %s, want id %d %s", v, got.ID, got.Schema.Schema, id, want.Schema.Schema)
		}
	}
	if rep.Copied != 2 || rep.Present != 0 {
		t.Errorf("report copied %d present %d, want 2 and 0", rep.Copied, rep.Present)
	}
	if m := mode(t, dst, "orders-value"); m != sr.ModeReadOnly {
		t.Errorf("destination subject mode %s after the sync, want READONLY", m)
	}

	again := mustSync(t, src, dst, sel)
	if again.Changed() || again.Copied != 0 || again.Present != 2 || again.Err() != nil {
		t.Errorf("second sync: %s", again)
	}
	if !strings.Contains(again.String(), "nothing to copy") {
		t.Errorf("second sync's summary %q does not say nothing was copied", again)
	}
}

func TestSyncFollowsReferenceChainInDependencyOrder(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("com.acme.Currency", 1, 31, avro(record("Currency", "code")))
	srcReg.SeedSchema("com.acme.Money", 1, 32, avro(record("Money", "amount"),
		sr.SchemaReference{Name: "Currency", Subject: "com.acme.Currency", Version: 1}))
	srcReg.SeedSchema("orders-value", 1, 33, avro(record("Order", "id"),
		sr.SchemaReference{Name: "Money", Subject: "com.acme.Money", Version: 1}))
	dest := newDestination(t)
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders"}})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"com.acme.Currency v1 id31", "com.acme.Money v1 id32", "orders-value v1 id33"}
	if got := dest.Imports(); !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v (each referenced subject before its referrer)", got, want)
	}
	got := version(t, dst, "orders-value", 1)
	if len(got.References) != 1 || got.References[0].Subject != "com.acme.Money" || got.References[0].Version != 1 {
		t.Errorf("destination references %+v, want com.acme.Money version 1", got.References)
	}
	for _, s := range []string{"com.acme.Currency", "com.acme.Money", "orders-value"} {
		if m := mode(t, dst, s); m != sr.ModeReadOnly {
			t.Errorf("%s mode %s, want READONLY", s, m)
		}
	}
}

func TestSyncCopiesOnlyTheVersionAddedSince(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-value", 1, 7, avro(record("Order", "id")))
	dest := newDestination(t)
	dst := clientFor(t, dest)
	sel := Selection{Topics: []string{"orders"}}
	mustSync(t, src, dst, sel)

	// A producer on the source registers a new version mid-stream.
	id, v, err := srcReg.RegisterSchema("orders-value", avro(record("Order", "id", "total")))
	if err != nil {
		t.Fatal(err)
	}
	rep := mustSync(t, src, dst, sel)
	s := subjectReport(t, rep, "orders-value")
	if !slices.Equal(s.Copied, []CopiedVersion{{Version: v, ID: id}}) || s.Present != 1 {
		t.Errorf("second sync copied %v with %d present, want only version %d (id %d) with 1 present", s.Copied, s.Present, v, id)
	}
	if got := dest.Imports(); len(got) != 2 || got[1] != fmt.Sprintf("orders-value v%d id%d", v, id) {
		t.Errorf("writes %v, want version 1 then only the new version", got)
	}
	if got := version(t, dst, "orders-value", v); got.ID != id {
		t.Errorf("new version has id %d on the destination, want %d", got.ID, id)
	}
}

func TestSyncKeepsSoftDeletedVersions(t *testing.T) {
	srcReg, src := newSource(t)
	for v := 1; v <= 3; v++ {
		srcReg.SeedSchema("orders-value", v, 10+v, avro(record("Order", fmt.Sprintf("f%d", v))))
	}
	if err := src.DeleteSchema(context.Background(), "orders-value", 2, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	dest := newDestination(t)
	dst := clientFor(t, dest)
	sel := Selection{Topics: []string{"orders"}}

	rep := mustSync(t, src, dst, sel)
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, dst, "orders-value", true); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("destination versions with deleted ones %v, want [1 2 3]", got)
	}
	if got := versions(t, dst, "orders-value", false); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("destination live versions %v, want [1 3]: version 2 soft-deleted as on the source", got)
	}
	if got := version(t, dst, "orders-value", 2); got.ID != 12 {
		t.Errorf("soft-deleted version 2 has id %d, want 12: a record written while it was live still names it", got.ID)
	}

	// Deleted on the source after it was copied: the next sync follows.
	if err := src.DeleteSchema(context.Background(), "orders-value", 3, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	rep = mustSync(t, src, dst, sel)
	if s := subjectReport(t, rep, "orders-value"); !slices.Equal(s.SoftDeleted, []int{3}) || len(s.Copied) != 0 {
		t.Errorf("after a later soft delete: copied %v soft-deleted %v, want nothing copied and [3]", s.Copied, s.SoftDeleted)
	}
	if got := versions(t, dst, "orders-value", false); !slices.Equal(got, []int{1}) {
		t.Errorf("destination live versions %v, want [1]", got)
	}
}

func TestSyncCopiesCompatibility(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-value", 1, 5, avro(record("Order", "id")))
	if err := srcReg.SetCompat("orders-value", sr.CompatFullTransitive); err != nil {
		t.Fatal(err)
	}
	dest := newDestination(t, srfake.WithGlobalCompat(sr.CompatBackward))
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders"}})
	if s := subjectReport(t, rep, "orders-value"); s.Compatibility != sr.CompatFullTransitive {
		t.Errorf("report compatibility %s, want FULL_TRANSITIVE", s.Compatibility)
	}
	got, err := readCompatibility(context.Background(), dst, "orders-value")
	if err != nil || got != sr.CompatFullTransitive {
		t.Errorf("destination compatibility %s (%v), want FULL_TRANSITIVE", got, err)
	}
}

func TestSyncRefusesAnIDTheDestinationUsesForAnotherSchema(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-value", 1, 101, avro(record("Order", "id")))
	srcReg.SeedSchema("payments-value", 1, 102, avro(record("Payment", "id")))
	dest := newDestination(t)
	other := avro(record("Someone", "else"))
	dest.Context("").SeedSchema("inventory-value", 1, 101, other)
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders", "payments"}})
	t.Logf("with a conflict: %s", rep)
	s := subjectReport(t, rep, "orders-value")
	var conflict *IDConflictError
	if !errors.As(s.Err, &conflict) {
		t.Fatalf("orders-value error %v, want an IDConflictError", s.Err)
	}
	for _, want := range []string{"101", `"orders-value"`, `"inventory-value"`} {
		if !strings.Contains(s.Err.Error(), want) {
			t.Errorf("error %q does not name %s", s.Err, want)
		}
	}
	if got := version(t, dst, "inventory-value", 1); got.ID != 101 || got.Schema.Schema != other.Schema {
		t.Errorf("the holder of id 101 was changed: %+v", got)
	}
	if got := versions(t, dst, "orders-value", true); got != nil {
		t.Errorf("orders-value has versions %v on the destination, want none", got)
	}
	if got := version(t, dst, "payments-value", 1); got.ID != 102 {
		t.Errorf("payments-value id %d, want 102: another subject's conflict must not stop it", got.ID)
	}
	if rep.Failed != 1 || rep.Copied != 1 {
		t.Errorf("report: %s", rep)
	}
}

func TestSyncRefusesAVersionTheDestinationHasWithAnotherSchema(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-value", 1, 101, avro(record("Order", "id")))
	srcReg.SeedSchema("orders-value", 2, 102, avro(record("Order", "id", "v2")))
	dest := newDestination(t)
	dest.Context("").SeedSchema("orders-value", 1, 50, avro(record("Local", "id")))
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders"}})
	var conflict *VersionConflictError
	if err := subjectReport(t, rep, "orders-value").Err; !errors.As(err, &conflict) || conflict.Version != 1 || conflict.DestinationID != 50 {
		t.Fatalf("error %v, want a version 1 conflict with destination id 50", err)
	}
	if got := versions(t, dst, "orders-value", true); !slices.Equal(got, []int{1}) {
		t.Errorf("destination versions %v, want only its own [1]", got)
	}
	if got := version(t, dst, "orders-value", 1); got.ID != 50 {
		t.Errorf("destination version 1 id %d, want 50 kept", got.ID)
	}
}

func TestSyncFanInWritesCollidingIDsIntoTwoContexts(t *testing.T) {
	eastReg, east := newSource(t)
	westReg, west := newSource(t)
	// Both sources numbered from 1: their ids collide.
	eastOrder, westPayment := avro(record("EastOrder", "id")), avro(record("WestPayment", "id"))
	eastReg.SeedSchema("orders-value", 1, 1, eastOrder)
	westReg.SeedSchema("payments-value", 1, 1, westPayment)
	dest := newDestination(t)
	dst := clientFor(t, dest)

	for _, c := range []struct {
		src *sr.Client
		sel Selection
	}{
		{east, Selection{Topics: []string{"orders"}, Context: ".east"}},
		{west, Selection{Topics: []string{"payments"}, Context: ".west"}},
	} {
		if err := mustSync(t, c.src, dst, c.sel).Err(); err != nil {
			t.Fatalf("sync into %s: %v", c.sel.Context, err)
		}
	}
	for regContext, want := range map[string]sr.Schema{".east": eastOrder, ".west": westPayment} {
		got, err := dst.SchemaByID(sr.InContext(context.Background(), regContext), 1)
		if err != nil || got.Schema != want.Schema {
			t.Errorf("id 1 in %s = %q (%v), want %q", regContext, got.Schema, err, want.Schema)
		}
	}
	if got := version(t, dst, ":.east:orders-value", 1); got.ID != 1 {
		t.Errorf(":.east:orders-value id %d, want 1", got.ID)
	}
	if m := mode(t, dst, ":.west:payments-value"); m != sr.ModeReadOnly {
		t.Errorf(":.west:payments-value mode %s, want READONLY", m)
	}

	// Into the default context instead, the second source's id 1 collides
	// with the first's and is refused.
	if err := mustSync(t, east, dst, Selection{Topics: []string{"orders"}}).Err(); err != nil {
		t.Fatal(err)
	}
	err := mustSync(t, west, dst, Selection{Topics: []string{"payments"}}).Err()
	var conflict *IDConflictError
	if !errors.As(err, &conflict) || conflict.ID != 1 || conflict.Source != "payments-value" || conflict.Holder != "orders-value" {
		t.Fatalf("default-context fan-in error %v, want id 1 refused for payments-value, held by orders-value", err)
	}
}

func TestSyncTopicSubjectsTakeTheDestinationPrefix(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-key", 1, 1, sr.Schema{Schema: `"string"`})
	srcReg.SeedSchema("customers-value", 1, 2, avro(record("Customer", "id")))
	srcReg.SeedSchema("com.acme.Money", 1, 3, avro(record("Money", "amount")))
	srcReg.SeedSchema("orders-value", 1, 4, avro(record("Order", "id"),
		sr.SchemaReference{Name: "Customer", Subject: "customers-value", Version: 1},
		sr.SchemaReference{Name: "Money", Subject: "com.acme.Money", Version: 1}))
	srcReg.SeedSchema("payments-value", 1, 5, avro(record("Payment", "id")))
	dest := newDestination(t)
	dst := clientFor(t, dest)

	// customers has no key schema: not an error.
	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders", "customers"}, TopicPrefix: "east."})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	for subject, id := range map[string]int{"east.orders-key": 1, "east.customers-value": 2, "com.acme.Money": 3, "east.orders-value": 4} {
		if got := version(t, dst, subject, 1); got.ID != id {
			t.Errorf("%s id %d, want %d", subject, got.ID, id)
		}
	}
	refs := version(t, dst, "east.orders-value", 1).References
	wantRefs := []sr.SchemaReference{
		{Name: "Customer", Subject: "east.customers-value", Version: 1},
		{Name: "Money", Subject: "com.acme.Money", Version: 1},
	}
	if !slices.Equal(refs, wantRefs) {
		t.Errorf("references %+v, want %+v: a topic's subject is renamed, a shared type is not", refs, wantRefs)
	}
	for _, s := range []string{"orders-value", "payments-value", "east.payments-value"} {
		if got := versions(t, dst, s, true); got != nil {
			t.Errorf("%s copied (%v), but it is not selected under that name", s, got)
		}
	}
}

func TestSyncSelectsSubjectsByWholeNameRegex(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("com.acme.Money", 1, 1, avro(record("Money", "amount")))
	srcReg.SeedSchema("com.acme.Address", 1, 2, avro(record("Address", "street")))
	srcReg.SeedSchema("xcom.acme.Other", 1, 3, avro(record("Other", "x")))
	srcReg.SeedSchema("orders-value", 1, 4, avro(record("Order", "id")))
	dest := newDestination(t)
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{SubjectRegex: `com\.acme\..*`})
	var got []string
	for _, s := range rep.Subjects {
		got = append(got, s.Destination)
	}
	slices.Sort(got)
	if want := []string{"com.acme.Address", "com.acme.Money"}; !slices.Equal(got, want) {
		t.Errorf("synced %v, want %v (a whole-name match)", got, want)
	}
	if got := version(t, dst, "com.acme.Address", 1); got.ID != 2 {
		t.Errorf("com.acme.Address id %d, want 2", got.ID)
	}
}

func TestSelectionIsValidated(t *testing.T) {
	for _, c := range []struct {
		sel  Selection
		want string
	}{
		{Selection{}, "selects nothing"},
		{Selection{SubjectRegex: "("}, "subject regex"},
		{Selection{Topics: []string{"orders"}, Context: "east"}, "context"},
		{Selection{Topics: []string{"orders"}, Context: ".ea:st"}, "context"},
		{Selection{Topics: []string{""}}, "topic"},
	} {
		_, err := PlanSync(context.Background(), nil, nil, c.sel)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one about %s", c.sel, err, c.want)
		}
	}
}

func TestDependencyOrderRefusesAReferenceCycle(t *testing.T) {
	got := dependencyOrder([]SubjectPlan{
		{Source: "a", references: []string{"b"}},
		{Source: "b", references: []string{"a"}},
		{Source: "c", references: []string{"d"}},
		{Source: "d"},
	})
	var order []string
	for _, s := range got {
		order = append(order, s.Source)
		wantErr := s.Source == "a" || s.Source == "b"
		if (s.Err != nil) != wantErr {
			t.Errorf("%s error %v; want an error only for the cycle a -> b", s.Source, s.Err)
		}
	}
	if slices.Index(order, "d") > slices.Index(order, "c") {
		t.Errorf("order %v puts c before the d it references", order)
	}
}

// A referenced subject that conflicts at a later version does not fail a
// referrer whose reference the destination already has; a referrer whose
// reference is missing fails with a message naming it.
func TestSyncReferrerDependsOnlyOnTheVersionsItNeeds(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("com.acme.Money", 1, 40, avro(record("Money", "amount")))
	srcReg.SeedSchema("com.acme.Money", 2, 41, avro(record("Money", "amount", "currency")))
	srcReg.SeedSchema("orders-value", 1, 42, avro(record("Order", "id"),
		sr.SchemaReference{Name: "Money", Subject: "com.acme.Money", Version: 1}))
	srcReg.SeedSchema("payments-value", 1, 43, avro(record("Payment", "id"),
		sr.SchemaReference{Name: "Money", Subject: "com.acme.Money", Version: 2}))
	dest := newDestination(t)
	dest.Context("").SeedSchema("com.acme.Money", 1, 40, avro(record("Money", "amount")))
	dest.Context("").SeedSchema("com.acme.Money", 2, 99, avro(record("LocalMoney", "x")))
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders", "payments"}})
	var conflict *VersionConflictError
	if err := subjectReport(t, rep, "com.acme.Money").Err; !errors.As(err, &conflict) || conflict.Version != 2 {
		t.Fatalf("com.acme.Money error %v, want a version 2 conflict", err)
	}
	if s := subjectReport(t, rep, "orders-value"); s.Err != nil || len(s.Copied) != 1 {
		t.Errorf("orders-value: %+v; want it copied, since Money version 1 is on the destination", s)
	}
	payments := subjectReport(t, rep, "payments-value")
	if payments.Err == nil || !strings.Contains(payments.Err.Error(), `"com.acme.Money" version 2`) {
		t.Errorf("payments-value error %v, want one naming the missing com.acme.Money version 2", payments.Err)
	}
	if got := versions(t, dst, "payments-value", true); got != nil {
		t.Errorf("payments-value has versions %v, want none", got)
	}
}

// Soft-deleted on the source, a referrer first and then the version it
// referenced: the destination gets both, written while live and deleted
// referrer first, since a registry refuses to reference a deleted version
// and to delete a referenced one.
func TestSyncKeepsASoftDeletedReferenceChain(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("com.acme.Money", 1, 60, avro(record("Money", "amount")))
	srcReg.SeedSchema("orders-value", 1, 61, avro(record("Order", "id"),
		sr.SchemaReference{Name: "Money", Subject: "com.acme.Money", Version: 1}))
	ctx := context.Background()
	for _, s := range []string{"orders-value", "com.acme.Money"} {
		if err := src.DeleteSchema(ctx, s, 1, sr.SoftDelete); err != nil {
			t.Fatalf("soft-deleting %s on the source: %v", s, err)
		}
	}
	dest := newDestination(t)
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders"}})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	for subject, id := range map[string]int{"com.acme.Money": 60, "orders-value": 61} {
		if got := version(t, dst, subject, 1); got.ID != id {
			t.Errorf("%s version 1 id %d, want %d", subject, got.ID, id)
		}
		if live := versions(t, dst, subject, false); len(live) != 0 {
			t.Errorf("%s live versions %v, want none: soft-deleted as on the source", subject, live)
		}
	}
}

// One schema under several subjects has one id. The destination holding
// that id for the same schema already is no conflict: the id is reused.
func TestSyncSharesAnIDBetweenSubjectsWithTheSameSchema(t *testing.T) {
	srcReg, src := newSource(t)
	str := sr.Schema{Schema: `"string"`}
	srcReg.SeedSchema("orders-key", 1, 1, str)
	if id, _, err := srcReg.RegisterSchema("payments-key", str); err != nil || id != 1 {
		t.Fatalf("source reuse of id 1: id %d, %v", id, err)
	}
	dest := newDestination(t)
	dest.Context("").SeedSchema("legacy-key", 1, 1, str)
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders", "payments"}})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"orders-key", "payments-key", "legacy-key"} {
		if got := version(t, dst, s, 1); got.ID != 1 || got.Schema.Schema != str.Schema {
			t.Errorf("%s version 1 = id %d %s, want id 1 %s", s, got.ID, got.Schema.Schema, str.Schema)
		}
	}
}
