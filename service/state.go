package service

import "fmt"

// PartitionState is the actual state of a mirror partition, from the seed's
// lifecycle. The zero value is StateUnknown: the absence of state.
type PartitionState string

// The partition states. UNKNOWN is never stored; it is a NULL state column.
const (
	StateUnknown   PartitionState = ""
	StatePreparing PartitionState = "PREPARING"
	StateMirroring PartitionState = "MIRRORING"
	StatePausing   PartitionState = "PAUSING"
	StatePaused    PartitionState = "PAUSED"
	StateStopping  PartitionState = "STOPPING"
	StateStopped   PartitionState = "STOPPED"
	StateFailed    PartitionState = "FAILED"
)

// AllStates lists every stored state, in lifecycle order.
var AllStates = []PartitionState{
	StatePreparing, StateMirroring, StatePausing, StatePaused,
	StateStopping, StateStopped, StateFailed,
}

// String returns the state's name, with UNKNOWN for the absence of state.
func (s PartitionState) String() string {
	if s == StateUnknown {
		return "UNKNOWN"
	}
	return string(s)
}

// Valid reports whether s is a known state (UNKNOWN included).
func (s PartitionState) Valid() bool {
	if s == StateUnknown {
		return true
	}
	for _, k := range AllStates {
		if s == k {
			return true
		}
	}
	return false
}

// validFrom is the seed's table: for each target state, the states it may be
// entered from. FAILED may be entered from any state and is handled apart.
var validFrom = map[PartitionState][]PartitionState{
	StatePreparing: {StateUnknown, StateStopped, StateFailed},
	StateMirroring: {StatePreparing, StatePaused},
	StatePausing:   {StateMirroring},
	StatePaused:    {StatePausing},
	StateStopping:  {StatePreparing, StateMirroring, StatePausing, StatePaused},
	StateStopped:   {StateStopping},
}

// CanTransition is the one place that decides whether a partition may move
// from one state to another. Every state write goes through it.
func CanTransition(from, to PartitionState) bool {
	if !from.Valid() || !to.Valid() || to == StateUnknown {
		return false
	}
	if to == StateFailed {
		return true
	}
	for _, f := range validFrom[to] {
		if f == from {
			return true
		}
	}
	return false
}

// CheckTransition returns an *InvalidTransitionError when from → to is not a
// valid step.
func CheckTransition(from, to PartitionState) error {
	if CanTransition(from, to) {
		return nil
	}
	return &InvalidTransitionError{From: from, To: to}
}

// InvalidTransitionError is a refused state change.
type InvalidTransitionError struct {
	From, To PartitionState
}

func (e *InvalidTransitionError) Error() string {
	return fmt.Sprintf("invalid partition state transition %s → %s", e.From, e.To)
}
