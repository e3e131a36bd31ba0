package main

import (
	"context"
	"time"

	"kmirror/internal/runtime/secretbox"
	"kmirror/migrations"
	"kmirror/repo"
	"kmirror/service"
)

// offlineControl opens the service on the database at dbURL for the
// commands that work on it directly (restore, secrets rotate, heartbeats
// rotate-key), migrating it first when migrate is set. secrets open the
// stored source secrets (nil: none). close releases the pool.
func offlineControl(ctx context.Context, dbURL string, migrate bool, secrets *secretbox.Keyring) (svc *service.Control, close func(), err error) {
	if migrate {
		if err := migrations.Up(dbURL); err != nil {
			return nil, nil, err
		}
	}
	pool, err := repo.Open(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	cfg := service.Config{Pool: pool, Catalog: service.KafkaCatalog(5 * time.Second)}
	if secrets != nil {
		cfg.Secrets = secrets
	}
	if svc, err = service.NewControl(cfg); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return svc, pool.Close, nil
}
