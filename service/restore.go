package service

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// RestoreResult says what a restore rebuilt, and what an operator must
// still do.
type RestoreResult struct {
	Mirrors    int
	Topics     int
	Partitions int
	// NeedSecrets lists mirrors whose source secrets were redacted in
	// __mirror_state: set them with PATCH before they can connect.
	NeedSecrets []string
}

// Restore rebuilds an empty database from the latest __mirror_state value
// of every key (a nil value is a tombstone and was dropped by the caller).
// Checkpoints may be a little old; alignment in PREPARING makes them exact.
// Leases start free.
func (s *Service) Restore(ctx context.Context, latest map[string][]byte) (RestoreResult, error) {
	var res RestoreResult
	mirrors, topics, parts, err := decodeState(latest)
	if err != nil {
		return res, err
	}
	err = repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		existing, err := repo.MirrorsList(ctx, tx)
		if err != nil {
			return err
		}
		if len(existing) > 0 {
			return &ConflictError{Detail: fmt.Sprintf("the database already has %d mirror(s); restore needs an empty one", len(existing))}
		}
		known := map[string]bool{}
		for _, m := range mirrors {
			if m.Version > RecordVersion {
				return fmt.Errorf("mirror %s: record version %d is newer than this kmirror understands (%d)", m.Name, m.Version, RecordVersion)
			}
			row := repo.Mirror{Name: m.Name, BootstrapServers: m.Source.BootstrapServers,
				SecurityProtocol: m.Source.SecurityProtocol, SASLMechanism: m.Source.SASLMechanism,
				SASLUsername: m.Source.SASLUsername, TLSCAPEM: m.Source.TLSCAPEM, TLSCertPEM: m.Source.TLSCertPEM,
				TLSServerName: m.Source.TLSServerName, Config: m.Config}
			if _, err := repo.MirrorsInsert(ctx, tx, row); err != nil {
				return fmt.Errorf("restore mirror %s: %w", m.Name, err)
			}
			if m.Source.SASLPasswordSet || m.Source.TLSKeySet {
				res.NeedSecrets = append(res.NeedSecrets, m.Name)
			}
			known[m.Name] = true
			res.Mirrors++
		}
		for _, t := range topics {
			if !known[t.Mirror] {
				continue // a topic record that outlived its mirror's
			}
			if err := repo.TopicsUpsert(ctx, tx, repo.TopicsUpsertParams{Mirror: t.Mirror, Topic: t.Topic,
				DesiredState: t.DesiredState, ReplicationFactor: t.ReplicationFactor, Recreate: t.Recreate,
				Partitions: int32(t.Partitions)}); err != nil {
				return fmt.Errorf("restore topic %s/%s: %w", t.Mirror, t.Topic, err)
			}
			res.Topics++
		}
		for _, p := range parts {
			n, err := repo.PartitionsRestore(ctx, tx, repo.PartitionsRestoreParams{Mirror: p.Mirror, Topic: p.Topic,
				Partition: p.Partition, State: p.State, PreviousState: p.PreviousState, Error: p.Error,
				SrcNext: p.SrcNext, DstNext: p.DstNext, LostRecords: p.LostRecords})
			if err != nil {
				return fmt.Errorf("restore partition %s/%s/%d: %w", p.Mirror, p.Topic, p.Partition, err)
			}
			res.Partitions += int(n)
		}
		sort.Strings(res.NeedSecrets)
		return repo.EventsInsert(ctx, tx, repo.Event{Kind: EventStateRestored, Message: fmt.Sprintf(
			"restored %d mirror(s), %d topic(s), %d partition state(s) from __mirror_state", res.Mirrors, res.Topics, res.Partitions)})
	})
	return res, err
}

// decodeState decodes the latest value of every __mirror_state key, by the
// key's kind; an unknown key or a value that does not decode is an error.
func decodeState(latest map[string][]byte) ([]MirrorRecord, []TopicRecord, []PartitionRecord, error) {
	var mirrors []MirrorRecord
	var topics []TopicRecord
	var parts []PartitionRecord
	for _, key := range sortedKeys(latest) {
		val := latest[key]
		var err error
		switch {
		case strings.HasPrefix(key, "mirror/"):
			var m MirrorRecord
			err = json.Unmarshal(val, &m)
			mirrors = append(mirrors, m)
		case strings.HasPrefix(key, "topic/"):
			var t TopicRecord
			err = json.Unmarshal(val, &t)
			topics = append(topics, t)
		case strings.HasPrefix(key, "partition/"):
			var p PartitionRecord
			err = json.Unmarshal(val, &p)
			parts = append(parts, p)
		default:
			return nil, nil, nil, fmt.Errorf("unknown key %q in __mirror_state", key)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("decode %s: %w", key, err)
		}
	}
	return mirrors, topics, parts, nil
}
