package service

import (
	"context"

	"github.com/jackc/pgx/v5"

	"kmirror/repo"
)

// SyncedACLsKey is the __mirror_state key of the set of ACLs a mirror's
// metadata sync created on the destination. Restore needs that set: without
// it an ACL the source drops would stay on the destination for good, and
// telling kmirror's copies from local ACLs would be guesswork.
func SyncedACLsKey(mirror string) string { return "acls/" + mirror }

// SyncedACLsRecord is the whole set, published again at every change (it is
// small: the ACLs of one mirror's topics and groups).
type SyncedACLsRecord struct {
	Version int         `json:"version"`
	Mirror  string      `json:"mirror"`
	ACLs    []SyncedACL `json:"acls"`
}

// SyncedACL is one ACL binding with Kafka's names (TOPIC, LITERAL, READ,
// ALLOW), as it is on the destination: its resource is named with the
// mirror's topic.name.prefix or group.name.prefix when it has one, so the
// set says exactly which destination ACLs are the mirror's.
type SyncedACL struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func syncedACLOf(a repo.SyncedACL) SyncedACL { return SyncedACL(a) }
func (a SyncedACL) row() repo.SyncedACL      { return repo.SyncedACL(a) }

// RecordSyncedACLs records ACLs the sync is about to create, with the
// mirror's new set for __mirror_state, in one transaction. Recording first
// means a crash in between leaves a record of an ACL that may not exist,
// never an ACL of kmirror's that nobody knows about.
func (s *Workers) RecordSyncedACLs(ctx context.Context, mirror string, acls []repo.SyncedACL) error {
	return repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		for _, a := range acls {
			if err := repo.SyncedACLsInsert(ctx, tx, mirror, a); err != nil {
				return err
			}
		}
		return publishSyncedACLs(ctx, tx, mirror)
	})
}

// ForgetSyncedACLs forgets ACLs the sync created once they are gone from
// the destination, and publishes the mirror's new set, in one transaction.
func (s *Workers) ForgetSyncedACLs(ctx context.Context, mirror string, acls []repo.SyncedACL) error {
	if len(acls) == 0 {
		return nil
	}
	return repo.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := repo.SyncedACLsDelete(ctx, tx, mirror, acls); err != nil {
			return err
		}
		return publishSyncedACLs(ctx, tx, mirror)
	})
}

func publishSyncedACLs(ctx context.Context, tx pgx.Tx, mirror string) error {
	rows, err := repo.SyncedACLsList(ctx, tx, mirror)
	if err != nil {
		return err
	}
	rec := SyncedACLsRecord{Version: RecordVersion, Mirror: mirror, ACLs: make([]SyncedACL, len(rows))}
	for i, r := range rows {
		rec.ACLs[i] = syncedACLOf(r)
	}
	return repo.OutboxInsert(ctx, tx, mirror, SyncedACLsKey(mirror), rec)
}
