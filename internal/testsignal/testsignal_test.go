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
