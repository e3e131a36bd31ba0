package service

import (
	"context"
	"time"

	"kmirror/repo"
)

// Instance is a kmirror server process sharing the database.
type Instance struct {
	ID          string
	Hostname    string
	Version     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	StoppedAt   *time.Time
	// Live: not stopped, and a heartbeat within the instance TTL.
	Live bool
	// Leases counts the partitions this instance's live session holds.
	Leases int
}

// ListInstances returns the known kmirror instances.
func (s *Service) ListInstances(ctx context.Context) ([]Instance, error) {
	list, err := repo.InstancesList(ctx, s.pool, s.instanceTTL)
	if err != nil {
		return nil, err
	}
	out := make([]Instance, len(list))
	for i, in := range list {
		out[i] = Instance{ID: in.ID, Hostname: in.Hostname, Version: in.Version, StartedAt: in.StartedAt,
			HeartbeatAt: in.HeartbeatAt, StoppedAt: in.StoppedAt, Live: in.Live, Leases: in.Leases}
	}
	return out, nil
}
