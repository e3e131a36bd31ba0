package service

import (
	"fmt"

	"kmirror/internal/vocabulary/states"
)

// PartitionState is the actual state of a mirror partition, from the seed's
// lifecycle (states.Partition). The zero value is StateUnknown: the absence
// of state.
type PartitionState = states.Partition

// The partition states. UNKNOWN is never stored; it is a NULL state column.
const (
	StateUnknown   = states.Unknown
	StatePreparing = states.Preparing
	StateMirroring = states.Mirroring
	StatePausing   = states.Pausing
	StatePaused    = states.Paused
	StateStopping  = states.Stopping
	StateStopped   = states.Stopped
	StateFailed    = states.Failed
)

// AllStates lists every stored state, in lifecycle order.
var AllStates = states.All

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
