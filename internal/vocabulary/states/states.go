// Package states is the vocabulary of mirror states: a partition's actual
// state (the seed's lifecycle) and a mirror topic's desired state. repo rows
// carry these types and service decides the transitions between them; the
// types live apart from both so that repo need not import service.
package states

// Partition is the actual state of a mirror partition. The zero value is
// Unknown: the absence of state, stored as a NULL column.
type Partition string

// The partition states.
const (
	Unknown   Partition = ""
	Preparing Partition = "PREPARING"
	Mirroring Partition = "MIRRORING"
	Pausing   Partition = "PAUSING"
	Paused    Partition = "PAUSED"
	Stopping  Partition = "STOPPING"
	Stopped   Partition = "STOPPED"
	Failed    Partition = "FAILED"
)

// All lists every stored partition state, in lifecycle order.
var All = []Partition{Preparing, Mirroring, Pausing, Paused, Stopping, Stopped, Failed}

// String returns the state's name, with UNKNOWN for the absence of state.
func (s Partition) String() string {
	if s == Unknown {
		return "UNKNOWN"
	}
	return string(s)
}

// Valid reports whether s is a known state (Unknown included).
func (s Partition) Valid() bool {
	if s == Unknown {
		return true
	}
	for _, k := range All {
		if s == k {
			return true
		}
	}
	return false
}

// Desired is what an operator asked of a mirror topic.
type Desired string

// The desired states.
const (
	DesiredMirroring Desired = "mirroring"
	DesiredPaused    Desired = "paused"
	DesiredStopped   Desired = "stopped"
)
