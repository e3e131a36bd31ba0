package devregistry

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`

func newRegistry(t *testing.T) (*Registry, *sr.Client) {
	t.Helper()
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	cl, err := sr.NewClient(sr.URLs(r.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return r, cl
}

func setMode(t *testing.T, cl *sr.Client, subject string, m sr.Mode) {
	t.Helper()
	for _, res := range cl.SetMode(context.Background(), m, subject) {
		if res.Err != nil {
			t.Fatalf("set %s %s: %v", subject, m, res.Err)
		}
	}
}

// An import keeps its id and version; READONLY refuses registrations; an id
// or version outside IMPORT mode is refused.
func TestImportKeepsIDsAndReadOnlyRefuses(t *testing.T) {
	r, cl := newRegistry(t)
	ctx := context.Background()
	schema := sr.Schema{Schema: orderSchema, Type: sr.TypeAvro}

	if _, err := cl.RegisterSchema(ctx, "orders-value", schema, 42, 3); err == nil {
		t.Fatal("an id and version were taken outside IMPORT mode")
	}
	setMode(t, cl, "orders-value", sr.ModeImport)
	if id, err := cl.RegisterSchema(ctx, "orders-value", schema, 42, 3); err != nil || id != 42 {
		t.Fatalf("import: id %d, %v; want 42", id, err)
	}
	got, err := cl.SchemaByVersion(ctx, "orders-value", 3)
	if err != nil || got.ID != 42 {
		t.Fatalf("version 3: %+v, %v; want id 42", got, err)
	}
	if want := []string{"orders-value v3 id42"}; !slices.Equal(r.Imports(), want) {
		t.Errorf("imports %v, want %v", r.Imports(), want)
	}

	setMode(t, cl, "orders-value", sr.ModeReadOnly)
	_, err = cl.RegisterSchema(ctx, "orders-value", sr.Schema{Schema: `"string"`}, -1, -1)
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != sr.ErrOperationNotPermitted.Code {
		t.Fatalf("registration into a READONLY subject: %v, want operation not permitted", err)
	}
}

// Two contexts hold the same id, each its own schema.
func TestContextsHaveTheirOwnIDs(t *testing.T) {
	r, cl := newRegistry(t)
	r.Context(".east").SeedSchema(":.east:orders-value", 1, 1, sr.Schema{Schema: orderSchema})
	r.Context(".west").SeedSchema(":.west:payments-value", 1, 1, sr.Schema{Schema: `"string"`})
	for c, want := range map[string]string{".east": orderSchema, ".west": `"string"`} {
		got, err := cl.SchemaByID(sr.InContext(context.Background(), c), 1)
		if err != nil || got.Schema != want {
			t.Errorf("id 1 in %s: %q, %v; want %q", c, got.Schema, err, want)
		}
	}
	if _, err := cl.SchemaByID(context.Background(), 1); err == nil {
		t.Error("id 1 found in the default context, which holds nothing")
	}
}

// A registry that is down answers nothing and keeps its state; one that is
// restarted comes back at the same URL with its subjects and modes.
func TestDownAndRestartKeepState(t *testing.T) {
	r, cl := newRegistry(t)
	ctx := context.Background()
	url := r.URL()
	r.Context("").SeedSchema("orders-value", 1, 7, sr.Schema{Schema: orderSchema})
	setMode(t, cl, "orders-value", sr.ModeReadOnly)

	r.SetDown(true)
	if _, err := cl.Subjects(ctx); err == nil {
		t.Fatal("a down registry answered")
	}
	r.SetDown(false)

	r.Stop()
	if _, err := cl.Subjects(ctx); err == nil {
		t.Fatal("a stopped registry answered")
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if r.URL() != url {
		t.Fatalf("URL %s after the restart, was %s", r.URL(), url)
	}
	got, err := cl.SchemaByVersion(ctx, "orders-value", 1)
	if err != nil || got.ID != 7 {
		t.Fatalf("after the restart: %+v, %v; want id 7", got, err)
	}
	m := cl.Mode(ctx, "orders-value")
	if len(m) != 1 || m[0].Err != nil || m[0].Mode != sr.ModeReadOnly {
		t.Fatalf("mode after the restart: %+v, want READONLY", m)
	}

	r.Close()
	if err := r.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// The injected faults: a 500 at one registration, a crash at another, and
// the hook that sees each.
func TestRegistrationFaults(t *testing.T) {
	r, cl := newRegistry(t)
	ctx := context.Background()
	var mu sync.Mutex
	var seen []int
	r.OnRegistration(func(n int) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, n)
	})
	r.FailRegistration(1)
	r.CrashAtRegistration(3)
	var re *sr.ResponseError
	if _, err := cl.RegisterSchema(ctx, "a-value", sr.Schema{Schema: `"string"`}, -1, -1); !errors.As(err, &re) || re.StatusCode != 500 {
		t.Fatalf("registration 1: %v, want a 500", err)
	}
	if _, err := cl.RegisterSchema(ctx, "a-value", sr.Schema{Schema: `"string"`}, -1, -1); err != nil {
		t.Fatalf("registration 2: %v", err)
	}
	if _, err := cl.RegisterSchema(ctx, "b-value", sr.Schema{Schema: `"int"`}, -1, -1); err == nil {
		t.Fatal("registration 3 answered although the registry crashed at it")
	}
	if _, ok := r.Context("").GetSchema("b-value", 1); ok {
		t.Error("registration 3 was stored")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []int{1, 2, 3}) {
		t.Errorf("hook saw %v, want [1 2 3]", seen)
	}
}
