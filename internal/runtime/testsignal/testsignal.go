// Package testsignal lets a component tell a test that it reached a point of
// interest (a lease expired, a renewal failed), so the test waits for the
// event itself instead of for a timeout with a tolerance, or injects a
// fault at that point. A Signal does nothing until a test calls Init or
// Hook, so production code raises them freely.
package testsignal

import (
	"sync/atomic"
	"time"
)

// TB is the part of testing.TB the waits use. It is declared here so that a
// binary whose components raise signals does not link the testing package;
// a *testing.T is one.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// WaitTimeout bounds WaitOrTimeout: long enough for a loaded CI machine,
// short enough to fail a stuck test.
const WaitTimeout = 15 * time.Second

// Signal is one point of interest carrying a value of type T. A test
// waits for its values (Init), runs a function where it is raised (Hook),
// or both.
type Signal[T any] struct {
	ch      chan T
	dropped atomic.Int64 // raised while the buffer was full
	hook    atomic.Pointer[func(T)]
}

// Init makes the signal deliver; call it before the component starts, as
// the component reads the buffer without a lock.
func (s *Signal[T]) Init() { s.ch = make(chan T, 10_000) }

// Hook makes fn run at each raise, synchronously in the raiser's goroutine
// after the value is delivered: a panic in fn is the component's, which is
// how a test injects a fault at that point. Set it before the component
// starts so that no raise is missed; a nil fn removes it.
func (s *Signal[T]) Hook(fn func(T)) {
	if fn == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&fn)
}

// Signal raises the signal with v. Without Init and Hook it does nothing.
// Delivery never blocks: a value raised while the buffer is full is
// counted, and fails the test at its next wait or check. Then the hook,
// if any, runs with v.
func (s *Signal[T]) Signal(v T) {
	if s.ch != nil {
		select {
		case s.ch <- v:
		default:
			s.dropped.Add(1)
		}
	}
	if fn := s.hook.Load(); fn != nil {
		(*fn)(v)
	}
}

// requireNoneDropped fails the test if a value was lost to a full buffer:
// what the test waits for may be among them.
func (s *Signal[T]) requireNoneDropped(tb TB) {
	tb.Helper()
	if n := s.dropped.Load(); n > 0 {
		tb.Fatalf("testsignal: %d signal(s) dropped: the buffer was full", n)
	}
}

// WaitOrTimeout returns the next raised value, failing the test after
// WaitTimeout.
func (s *Signal[T]) WaitOrTimeout(tb TB) T {
	tb.Helper()
	if s.ch == nil {
		tb.Fatal("testsignal: WaitOrTimeout on a signal that was not initialized")
	}
	s.requireNoneDropped(tb)
	select {
	case v := <-s.ch:
		return v
	case <-time.After(WaitTimeout):
		tb.Fatalf("testsignal: no signal within %s", WaitTimeout)
		panic("unreachable")
	}
}

// C receives the raised values, for a test that counts them in a select.
func (s *Signal[T]) C() <-chan T { return s.ch }

// RequireEmpty fails the test if a value is waiting.
func (s *Signal[T]) RequireEmpty(tb TB) {
	tb.Helper()
	s.requireNoneDropped(tb)
	select {
	case v := <-s.ch:
		tb.Fatalf("testsignal: unexpected signal %v", v)
	default:
	}
}
