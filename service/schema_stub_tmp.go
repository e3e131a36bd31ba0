package service

// TEMPORARY: stands in for branch sr-config's SourceRegistry and
// SchemaSyncConfigOf until it merges. Deleted at the merge.

import (
	"time"

	"kmirror/internal/kafka/schemaregistry"
	"kmirror/repo"
)

type SchemaSyncConfig struct {
	Interval     time.Duration
	SubjectRegex string
	Context      string
}

func SchemaSyncConfigOf(set map[string]string) SchemaSyncConfig {
	return SchemaSyncConfig{Interval: 10 * time.Second}
}

func (s *Workers) SourceRegistry(m repo.Mirror) (schemaregistry.Config, bool, error) {
	return schemaregistry.Config{}, false, nil
}
