package service

import "testing"

// TestCanTransitionTable checks every (from, to) cell of docs/design.md, "The partition state machine".
func TestCanTransitionTable(t *testing.T) {
	const (
		U = StateUnknown
		R = StatePreparing
		M = StateMirroring
		G = StatePausing
		P = StatePaused
		S = StateStopping
		D = StateStopped
		F = StateFailed
	)
	all := []PartitionState{U, R, M, G, P, S, D, F}
	// allowed[to] is the exact set of from-states; anything else is refused.
	allowed := map[PartitionState][]PartitionState{
		U: {},
		R: {U, D, F},
		M: {R, P},
		G: {M},
		P: {G},
		S: {R, M, G, P},
		D: {S},
		F: {U, R, M, G, P, S, D, F},
	}
	cells := 0
	for _, to := range all {
		for _, from := range all {
			want := false
			for _, a := range allowed[to] {
				if a == from {
					want = true
				}
			}
			cells++
			t.Run(from.String()+"→"+to.String(), func(t *testing.T) {
				if got := CanTransition(from, to); got != want {
					t.Fatalf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
				}
				err := CheckTransition(from, to)
				if (err == nil) != want {
					t.Fatalf("CheckTransition(%s, %s) = %v, want allowed=%v", from, to, err, want)
				}
			})
		}
	}
	if cells != 64 {
		t.Fatalf("covered %d cells, want 64", cells)
	}
}

func TestCanTransitionRejectsUnknownNames(t *testing.T) {
	if CanTransition("BOGUS", StateFailed) || CanTransition(StateMirroring, "BOGUS") {
		t.Fatal("unknown state names must never transition")
	}
	if got := (&InvalidTransitionError{From: StateFailed, To: StateStopping}).Error(); got != "invalid partition state transition FAILED → STOPPING" {
		t.Fatalf("message = %q", got)
	}
}
