package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/devenv/devregistry"
	"kmirror/internal/kafka/schemaregistry"
	"kmirror/workers/workertest"
)

// drRegistries are the Schema Registries beside the runbook's clusters: A's
// starts with a version of orders-value, and each primary's applications
// register a new one after every switch, as producers evolving a schema do.
type drRegistries struct {
	a, b       *devregistry.Registry
	regA, regB *sr.Client
	// versions are orders-value's versions in the order registered, on
	// whichever registry was the primary's then.
	versions []sr.SubjectSchema
}

func (w *drWorld) startRegistries() {
	t := w.t
	for _, r := range []**devregistry.Registry{&w.reg.a, &w.reg.b} {
		reg, err := devregistry.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(reg.Close)
		*r = reg
	}
	var err error
	if w.reg.regA, err = schemaregistry.NewClient(schemaregistry.Config{URLs: []string{w.reg.a.URL()}}); err != nil {
		t.Fatal(err)
	}
	if w.reg.regB, err = schemaregistry.NewClient(schemaregistry.Config{URLs: []string{w.reg.b.URL()}}); err != nil {
		t.Fatal(err)
	}
	w.registerOrders(w.reg.regA, "a0")
}

// registerOrders registers a new version of orders-value on a primary's
// registry: a field whose default names tag.
func (w *drWorld) registerOrders(cl *sr.Client, tag string) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := fmt.Sprintf(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},`+
		`{"name":"origin","type":"string","default":%q}]}`, tag)
	ss, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("registering orders-value (%s): %v", tag, err)
	}
	w.reg.versions = append(w.reg.versions, ss)
}

// waitSchemas waits until a registry holds every version of orders-value
// registered so far, each with its number and id, in mode.
func (w *drWorld) waitSchemas(what string, cl *sr.Client, mode sr.Mode) {
	t := w.t
	t.Helper()
	workertest.WaitFor(t, 30*time.Second, what+": orders-value's versions with their ids, "+mode.String(), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := cl.Schemas(ctx, "orders-value")
		if err != nil {
			return false, err.Error()
		}
		var have, want []string
		for _, s := range got {
			have = append(have, fmt.Sprintf("v%d id %d", s.Version, s.ID))
		}
		for _, s := range w.reg.versions {
			want = append(want, fmt.Sprintf("v%d id %d", s.Version, s.ID))
		}
		m := cl.Mode(ctx, "orders-value")[0]
		return slices.Equal(have, want) && m.Err == nil && m.Mode == mode,
			fmt.Sprintf("versions [%s] (want [%s]), mode %s %v", strings.Join(have, ", "), strings.Join(want, ", "), m.Mode, m.Err)
	})
}
