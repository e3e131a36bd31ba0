package repo

import "context"

// DeploymentID returns the id of this database's kmirror deployment
// (migration 000022), the same for every instance that shares it.
func DeploymentID(ctx context.Context, q DBTX) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id::text FROM deployment`).Scan(&id)
	return id, interpret(err)
}
