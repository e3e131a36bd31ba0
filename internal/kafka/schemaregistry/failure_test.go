package schemaregistry

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// seedOrdersAndPayments gives a source three versions of orders-value and
// one of payments-value.
func seedOrdersAndPayments(t *testing.T) *sr.Client {
	t.Helper()
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-value", 1, 21, avro(record("Order", "a")))
	srcReg.SeedSchema("orders-value", 2, 22, avro(record("Order", "a", "b")))
	srcReg.SeedSchema("orders-value", 3, 23, avro(record("Order", "a", "b", "c")))
	srcReg.SeedSchema("payments-value", 1, 30, avro(record("Payment", "a")))
	return src
}

// A destination registry that dies in the middle of a subject: the version
// written before stays whole, the subject stays in IMPORT mode because the
// registry cannot be told otherwise, every subject reports its error, and
// the next sync after the restart resumes and leaves them READONLY.
func TestSyncAcrossADestinationCrashAndRestart(t *testing.T) {
	src := seedOrdersAndPayments(t)
	dest := newDestination(t)
	dst := clientFor(t, dest)
	sel := Selection{Topics: []string{"orders", "payments"}}
	dest.CrashAtRegistration(2) // the write of orders-value version 2

	rep := mustSync(t, src, dst, sel)
	t.Logf("during the crash: %s", rep)
	orders := subjectReport(t, rep, "orders-value")
	if orders.Err == nil || !strings.Contains(orders.Err.Error(), "version 2") || !strings.Contains(orders.Err.Error(), "IMPORT") {
		t.Errorf("orders-value error %v, want one naming version 2 and the IMPORT mode it is left in", orders.Err)
	}
	if !orders.LeftInImport || len(orders.Copied) != 1 {
		t.Errorf("orders-value left in import %t, copied %v; want true and only version 1", orders.LeftInImport, orders.Copied)
	}
	if payments := subjectReport(t, rep, "payments-value"); payments.Err == nil || len(payments.Copied) != 0 || payments.LeftInImport {
		t.Errorf("payments-value: %+v, want an error, nothing copied and its mode untouched", payments)
	}
	// Checked in memory: the registry answers nothing while down.
	if got, ok := dest.Context("").GetSchema("orders-value", 1); !ok || got.ID != 21 {
		t.Errorf("version 1 on the destination = %+v, %t; want it whole with id 21", got, ok)
	}
	if _, ok := dest.Context("").GetSchema("orders-value", 2); ok {
		t.Error("version 2 is on the destination although its write never reached the registry")
	}

	// The registry restarts at the same URL with its state.
	dest.SetDown(false)
	if err := dest.Restart(); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dst, "orders-value"); m != sr.ModeImport {
		t.Errorf("orders-value mode %s after the crash, want IMPORT: the state the report announced", m)
	}
	rep = mustSync(t, src, dst, sel)
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Copied != 3 || rep.Present != 1 {
		t.Errorf("after the restart: %s; want versions 2 and 3 of orders and payments' 1 copied, 1 present", rep)
	}
	for _, s := range []string{"orders-value", "payments-value"} {
		if m := mode(t, dst, s); m != sr.ModeReadOnly {
			t.Errorf("%s mode %s after the resumed sync, want READONLY", s, m)
		}
	}
	if got := version(t, dst, "orders-value", 3); got.ID != 23 {
		t.Errorf("orders-value version 3 id %d, want 23", got.ID)
	}
}

// A write the registry refuses while it is up: the subject is put back to
// READONLY at once, with the versions before the failure kept.
func TestSyncRestoresReadOnlyAfterAFailedWrite(t *testing.T) {
	src := seedOrdersAndPayments(t)
	dest := newDestination(t)
	dst := clientFor(t, dest)
	dest.FailRegistration(2)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders", "payments"}})
	orders := subjectReport(t, rep, "orders-value")
	if orders.Err == nil || orders.LeftInImport || !orders.ModeSet {
		t.Errorf("orders-value: error %v, left in import %t, mode set %t; want an error and READONLY restored", orders.Err, orders.LeftInImport, orders.ModeSet)
	}
	if m := mode(t, dst, "orders-value"); m != sr.ModeReadOnly {
		t.Errorf("orders-value mode %s, want READONLY", m)
	}
	if got := versions(t, dst, "orders-value", true); len(got) != 1 || got[0] != 1 {
		t.Errorf("orders-value versions %v, want [1]", got)
	}
	if payments := subjectReport(t, rep, "payments-value"); payments.Err != nil || len(payments.Copied) != 1 {
		t.Errorf("payments-value: %+v, want it copied despite orders' failure", payments)
	}
}

// A source that cannot be reached fails each selected subject with the
// client's error and writes nothing; with a subject regex, which needs the
// source's list of subjects, the whole sync fails.
func TestSyncWithAnUnreachableSource(t *testing.T) {
	srcReg, src := newSource(t)
	srcReg.SeedSchema("orders-value", 1, 1, avro(record("Order", "a")))
	srcReg.Close()
	dest := newDestination(t)
	dst := clientFor(t, dest)

	rep := mustSync(t, src, dst, Selection{Topics: []string{"orders"}})
	if rep.Failed != 2 {
		t.Errorf("report %s; want orders-key and orders-value failed", rep)
	}
	for _, s := range rep.Subjects {
		if s.Err == nil || !strings.Contains(s.Err.Error(), "source registry") || !strings.Contains(s.Err.Error(), s.Source) {
			t.Errorf("%s error %v, want the source registry's failure naming the subject", s.Source, s.Err)
		}
	}
	if got := dest.Imports(); len(got) != 0 {
		t.Errorf("wrote %v with the source down", got)
	}
	if m := mode(t, dst, "orders-value"); m != sr.ModeReadWrite {
		t.Errorf("orders-value mode %s, want the destination's untouched READWRITE", m)
	}

	if _, err := Sync(context.Background(), src, dst, Selection{SubjectRegex: "orders-.*"}); err == nil || !strings.Contains(err.Error(), "listing the source registry's subjects") {
		t.Errorf("regex sync error %v, want the failed listing", err)
	}
}

// A sync cancelled while a write is in flight (a mirror stopping, an
// instance shutting down): the write may have landed or not, the subject is
// still closed to imports (READONLY), and the next sync finds what landed
// and copies the rest with the same ids.
func TestSyncCancelledMidWriteLeavesTheSubjectReadOnly(t *testing.T) {
	src := seedOrdersAndPayments(t)
	dest := newDestination(t)
	dst := clientFor(t, dest)
	sel := Selection{Topics: []string{"orders"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook := func(n int) {
		if n == 2 {
			cancel()
		}
	}
	dest.OnRegistration(hook)

	rep, err := Sync(ctx, src, dst, sel)
	if err != nil {
		t.Fatal(err)
	}
	orders := subjectReport(t, rep, "orders-value")
	if orders.Err == nil || !strings.Contains(orders.Err.Error(), "context canceled") {
		t.Errorf("orders-value error %v, want the cancellation", orders.Err)
	}
	if orders.LeftInImport || !orders.ModeSet {
		t.Errorf("left in import %t, mode set %t; want READONLY restored past the cancellation", orders.LeftInImport, orders.ModeSet)
	}
	if m := mode(t, dst, "orders-value"); m != sr.ModeReadOnly {
		t.Errorf("orders-value mode %s, want READONLY", m)
	}

	dest.OnRegistration(nil)
	rep = mustSync(t, src, dst, sel)
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	for v, id := range map[int]int{1: 21, 2: 22, 3: 23} {
		if got := version(t, dst, "orders-value", v); got.ID != id {
			t.Errorf("version %d id %d, want %d", v, got.ID, id)
		}
	}
}
