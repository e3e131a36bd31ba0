package api

// EventData is an event's details, typed by its kind; the fields a kind has
// are listed below and the others are absent. Kinds not listed carry no data.
//
//   - partition.state: mirror, topic, partition, from, to, epoch and owner
//     (the lease that made the change), reason (why, when known: the
//     message's cause) and error (the FAILED cause, when to is FAILED).
//   - partition.owner: mirror, topic, partition, state (kept), epoch, owner
//     (the new owner) and previous_owner (when known).
//   - partition.realigned: mirror, topic, partition, state (kept), epoch,
//     owner and cause.
type EventData struct {
	// Mirror, Topic and Partition name the partition (the event's own).
	Mirror    string `json:"mirror,omitempty" example:"m1"`
	Topic     string `json:"topic,omitempty" example:"orders"`
	Partition *int32 `json:"partition,omitempty" example:"0"`
	// From is the state left (partition.state); UNKNOWN for a partition
	// that had none.
	From PartitionState `json:"from,omitempty" example:"PREPARING"`
	// To is the state entered (partition.state).
	To PartitionState `json:"to,omitempty" example:"MIRRORING"`
	// State is the state kept (partition.owner, partition.realigned).
	State PartitionState `json:"state,omitempty" example:"MIRRORING"`
	// Reason says why the state changed (partition.state), when known.
	Reason string `json:"reason,omitempty" example:"aligned"`
	// Error is the FAILED cause (partition.state to FAILED).
	Error string `json:"error,omitempty"`
	// Cause says why a partition re-aligned in place (partition.realigned).
	Cause string `json:"cause,omitempty"`
	// Epoch is the partition lease's epoch: it grows with each new owner.
	Epoch *int64 `json:"epoch,omitempty" example:"3"`
	// Owner is the instance holding the partition's lease.
	Owner string `json:"owner,omitempty" example:"kmirror-0-4211"`
	// PreviousOwner is the instance that held it before (partition.owner).
	PreviousOwner string `json:"previous_owner,omitempty" example:"kmirror-1-3877"`
} // @name EventData
