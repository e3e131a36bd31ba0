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

// TestSignalHook: a hook runs in the raiser's goroutine, after the value is
// delivered, and its panic is the raiser's.
func TestSignalHook(t *testing.T) {
	var s Signal[int]
	s.Init()
	raiser := make(chan any)
	var hooked []int
	s.Hook(func(v int) {
		hooked = append(hooked, v) // no lock: it runs in the raiser's goroutine
		if v == 2 {
			panic("injected fault")
		}
	})
	go func() {
		defer func() { raiser <- recover() }()
		s.Signal(1)
		s.Signal(2)
		s.Signal(3) // not reached: the hook panicked
	}()
	if v := <-raiser; v != "injected fault" {
		t.Fatalf("the raiser recovered %v, want the hook's panic", v)
	}
	if len(hooked) != 2 || hooked[0] != 1 || hooked[1] != 2 {
		t.Fatalf("hook saw %v, want [1 2]", hooked)
	}
	// Both values were delivered before the hook ran.
	for _, want := range []int{1, 2} {
		if got := s.WaitOrTimeout(t); got != want {
			t.Fatalf("got %d, want %d", got, want)
		}
	}
	s.RequireEmpty(t)

	s.Hook(nil)
	s.Signal(4) // delivered, no hook
	if got := s.WaitOrTimeout(t); got != 4 || len(hooked) != 2 {
		t.Fatalf("after Hook(nil): got %d, hook saw %v", got, hooked)
	}
}

// TestSignalHookWithoutInit: a hook runs without Init, and nothing is
// buffered for a wait.
func TestSignalHookWithoutInit(t *testing.T) {
	var s Signal[string]
	var got string
	s.Hook(func(v string) { got = v })
	s.Signal("a")
	if got != "a" {
		t.Fatalf("hook saw %q, want %q", got, "a")
	}
	if s.C() != nil {
		t.Fatal("a hooked signal without Init has a buffer")
	}
}

// TestSignalInert: without Init and Hook, raising does nothing.
func TestSignalInert(t *testing.T) {
	var s Signal[int]
	s.Signal(1)
	if s.C() != nil || s.dropped.Load() != 0 || s.hook.Load() != nil {
		t.Fatal("an uninitialized signal kept something")
	}
}
