package service

import (
	"context"
	"time"

	"kmirror/repo"
)

// Instance is a kmirror server process sharing the database.
type Instance struct {
	ID        string
	Hostname  string
	Version   string
	StartedAt time.Time
	// HeartbeatAt is when the instance last renewed its session, the one
	// liveness clock it keeps (its start before it opened one).
	HeartbeatAt time.Time
	StoppedAt   *time.Time
	// Live: not stopped, and its session has not expired.
	Live bool
	// TakesLeases is false for an instance that runs only the control
	// plane (no destination cluster): it mirrors nothing.
	TakesLeases bool
	// Leases counts the partitions this instance's live session holds.
	Leases int
}

// ListInstances returns the known kmirror instances.
func (s *Control) ListInstances(ctx context.Context) ([]Instance, error) {
	list, err := repo.InstancesList(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := make([]Instance, len(list))
	for i, in := range list {
		out[i] = Instance{ID: in.ID, Hostname: in.Hostname, Version: in.Version, StartedAt: in.StartedAt,
			HeartbeatAt: in.RenewedAt, StoppedAt: in.StoppedAt, Live: in.Live, TakesLeases: in.TakesLeases, Leases: in.Leases}
	}
	return out, nil
}
