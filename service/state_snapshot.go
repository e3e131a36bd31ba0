package service

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"kmirror/repo"
)

// StateSnapshotQueued counts what QueueStateSnapshot queued, and the
// partitions whose records the relay's first checkpoint pass republishes.
type StateSnapshotQueued struct {
	Mirrors, Topics, ACLSets, Partitions int
	// FirstID is the id of the snapshot's first outbox row (0: none).
	// The relay publishes rows in id order, so while it is unpublished
	// the whole snapshot is.
	FirstID int64
}

// Records is how many outbox rows the snapshot queued.
func (q StateSnapshotQueued) Records() int { return q.Mirrors + q.Topics + q.ACLSets }

// QueueStateSnapshot queues the current record of every mirror, mirror
// topic and synced-ACL set as outbox rows, in one transaction, for a
// __mirror_state that lost them (a destination cluster rebuilt empty).
// Rows already published are not published again by the relay, and a
// restored database has no outbox rows at all, so the snapshot is built
// from the tables themselves. Partition records and offset maps are not
// queued: a relay publishes every partition's record with its whole map
// when it starts leading.
//
// The rows are read under locks (see repo.MirrorsListForShare and
// repo.SyncedACLsLockListAll) so that, per key, the snapshot's row is
// queued after every change it reflects and before every change it does
// not: the newest row of a key stays its newest value.
func QueueStateSnapshot(ctx context.Context, pool *pgxpool.Pool) (StateSnapshotQueued, error) {
	var q StateSnapshotQueued
	err := repo.WithTx(ctx, pool, func(tx pgx.Tx) error {
		q = StateSnapshotQueued{}
		mirrors, err := repo.MirrorsListForShare(ctx, tx)
		if err != nil || len(mirrors) == 0 {
			return err
		}
		topics, err := repo.TopicsListAll(ctx, tx)
		if err != nil {
			return err
		}
		acls, err := repo.SyncedACLsLockListAll(ctx, tx)
		if err != nil {
			return err
		}
		if q.Partitions, err = repo.PartitionsCount(ctx, tx); err != nil {
			return err
		}
		byMirror := map[string][]repo.Topic{}
		for _, t := range topics {
			byMirror[t.Mirror] = append(byMirror[t.Mirror], t)
		}
		var recs []repo.OutboxRecord
		add := func(mirror, key string, v any) error {
			raw, err := json.Marshal(v)
			if err == nil {
				recs = append(recs, repo.OutboxRecord{Mirror: mirror, Key: key, Value: raw})
			}
			return err
		}
		// A mirror's record goes before its topics' and its ACL set, as
		// when they were first written.
		for _, m := range mirrors {
			if err := add(m.Name, MirrorKey(m.Name), mirrorRecord(m)); err != nil {
				return err
			}
			q.Mirrors++
			for _, t := range byMirror[m.Name] {
				if err := add(m.Name, TopicKey(m.Name, t.Topic), topicRecord(t)); err != nil {
					return err
				}
				q.Topics++
			}
			// A mirror without synced ACLs gets no set: restore reads a
			// missing set as an empty one.
			if set, ok := acls[m.Name]; ok {
				rec := SyncedACLsRecord{Version: RecordVersion, Mirror: m.Name, ACLs: make([]SyncedACL, len(set))}
				for i, a := range set {
					rec.ACLs[i] = syncedACLOf(a)
				}
				if err := add(m.Name, SyncedACLsKey(m.Name), rec); err != nil {
					return err
				}
				q.ACLSets++
			}
		}
		q.FirstID, err = repo.OutboxInsertMany(ctx, tx, recs)
		return err
	})
	return q, err
}
