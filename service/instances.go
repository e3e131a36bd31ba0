package service

import (
	"context"

	"kmirror/repo"
)

// Instance is a kmirror server process sharing the database. RenewedAt is
// when it last renewed its session, the clock its leases hang on.
type Instance = repo.Instance

// ListInstances returns the known kmirror instances.
func (s *Control) ListInstances(ctx context.Context) ([]Instance, error) {
	return repo.InstancesList(ctx, s.pool)
}
