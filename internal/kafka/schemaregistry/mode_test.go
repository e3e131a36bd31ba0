package schemaregistry

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

func TestSetModeSwitchesOnlyTheNamedSubjects(t *testing.T) {
	dest := newDestination(t)
	dest.Context("").SeedSchema("east.orders-value", 1, 1, avro(record("Order", "a")))
	dest.Context("").SeedSchema("east.orders-key", 1, 2, sr.Schema{Schema: `"string"`})
	dst := clientFor(t, dest)
	ctx := context.Background()
	both := []string{"east.orders-value", "east.orders-key"}

	// Mirrored: read-only.
	if err := SetMode(ctx, dst, both, sr.ModeReadOnly); err != nil {
		t.Fatal(err)
	}
	for _, s := range both {
		if m := mode(t, dst, s); m != sr.ModeReadOnly {
			t.Errorf("%s mode %s, want READONLY", s, m)
		}
	}
	// A producer's registration is refused while mirrored.
	if _, err := dst.RegisterSchema(ctx, "east.orders-value", avro(record("Order", "a", "b")), -1, -1); err == nil {
		t.Error("a registration into a READONLY subject was accepted")
	}

	// Failed over: writable.
	if err := SetMode(ctx, dst, both[:1], sr.ModeReadWrite); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dst, "east.orders-value"); m != sr.ModeReadWrite {
		t.Errorf("east.orders-value mode %s after failover, want READWRITE", m)
	}
	if m := mode(t, dst, "east.orders-key"); m != sr.ModeReadOnly {
		t.Errorf("east.orders-key mode %s, want READONLY still: it was not named", m)
	}
	if _, err := dst.RegisterSchema(ctx, "east.orders-value", avro(record("Order", "a", "b")), -1, -1); err != nil {
		t.Errorf("a registration after failover was refused: %v", err)
	}

	// Never the global mode.
	if err := SetMode(ctx, dst, nil, sr.ModeReadOnly); err != nil {
		t.Errorf("an empty list: %v", err)
	}
	if err := SetMode(ctx, dst, []string{""}, sr.ModeReadOnly); err == nil {
		t.Error("an empty subject name was accepted")
	}
	if global := dst.Mode(ctx); global[0].Err != nil || global[0].Mode != sr.ModeReadWrite {
		t.Errorf("global mode %s (%v), want READWRITE untouched", global[0].Mode, global[0].Err)
	}

	// A registry that cannot be reached: the error names the subject.
	dest.SetDown(true)
	if err := SetMode(ctx, dst, both[:1], sr.ModeReadWrite); err == nil || !strings.Contains(err.Error(), `"east.orders-value"`) {
		t.Errorf("error %v, want one naming east.orders-value", err)
	}
}
