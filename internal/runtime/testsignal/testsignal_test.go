package testsignal

import "testing"

func TestSignal(t *testing.T) {
	var s Signal[int]
	s.Signal(1) // not initialized: nothing happens
	s.Init()
	s.RequireEmpty(t)
	s.Signal(2)
	s.Signal(3)
	if got := s.WaitOrTimeout(t); got != 2 {
		t.Fatalf("got %d, want 2", got)
	}
	if got := s.WaitOrTimeout(t); got != 3 {
		t.Fatalf("got %d, want 3", got)
	}
	s.RequireEmpty(t)
}

// fakeTB records a failure instead of ending the test.
type fakeTB struct{ failed string }

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatal(args ...any)                 { f.failed = "fatal" }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = format }

func TestSignalDroppedFailsTheTest(t *testing.T) {
	var s Signal[int]
	s.Init()
	for i := range cap(s.ch) + 1 {
		s.Signal(i)
	}
	var f fakeTB
	s.RequireEmpty(&f)
	if f.failed == "" {
		t.Fatal("a signal dropped on a full buffer did not fail the test")
	}
}
