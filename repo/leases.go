package repo

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leases follow river's elector: the TTL is applied with the database's
// now(), every statement that touches a held lease matches owner AND epoch,
// and taking a lease increments its epoch so the previous owner's writes are
// fenced. The holder's own clock decides when it stops trusting a lease.
//
// Every lease hangs on its owner's session (instances.session_epoch): a
// partition lease is held while lease_owner's session is still
// lease_session and has not expired, a mirror's metadata lease likewise
// with meta_lease_owner and meta_lease_session. One O(1) renewal of the
// session, the leases' clock (lease.Trust), renews all of its leases, as
// a Kafka group member heartbeats once and not per partition; each lease
// keeps its own epoch for fencing.

// leaseHeld is true for a partition p whose lease is held by a live session.
const leaseHeld = `EXISTS (SELECT 1 FROM instances i WHERE i.id = p.lease_owner
	AND i.session_epoch = p.lease_session AND i.session_expires_at > now())`

// metaLeaseHeld is true for a mirror (unqualified columns of mirrors) whose
// metadata lease is held by a live session.
const metaLeaseHeld = `EXISTS (SELECT 1 FROM instances i WHERE i.id = meta_lease_owner
	AND i.session_epoch = meta_lease_session AND i.session_expires_at > now())`

// activePartition is true for a partition that needs a worker: everything but
// a stopped topic's partition that has finished stopping (or never started),
// and the partitions of a mirror that needs credentials (restored without
// its secrets: a worker could only fail on authentication, so none runs).
// It expects mirror_partitions as p and mirror_topics as t.
const activePartition = `NOT (t.desired_state = 'stopped' AND (p.state IS NULL OR p.state = 'STOPPED'))
	AND NOT EXISTS (SELECT 1 FROM mirrors cm WHERE cm.name = t.mirror AND cm.missing_credentials <> '{}')`

// syncableMirror is true for a mirror whose metadata sync may run: one that
// needs credentials has none. It expects mirrors unqualified.
const syncableMirror = `missing_credentials = '{}'`

// PartitionLeaseRow names one leased mirror partition and its epoch.
type PartitionLeaseRow struct {
	Mirror    string
	Topic     string
	Partition int32
	Epoch     int64
	// Active is set by PartitionsOwned and PartitionsAcquireLeases:
	// false when the partition no longer needs a worker and the lease should
	// be handed back.
	Active bool
	// PreviousOwner is set by PartitionsAcquireLeases: the instance that
	// took the lease last before ("" if none ever did).
	PreviousOwner string
}

// MirrorLeaseRow names one mirror's metadata-sync lease and its epoch.
type MirrorLeaseRow struct {
	Mirror string
	Epoch  int64
}

// InstancesOpenSession starts a new session of a registered instance,
// valid for ttl, and returns its epoch. Partition leases of its earlier
// sessions are no longer held (anyone may take them, this instance too).
func InstancesOpenSession(ctx context.Context, q DBTX, id string, ttl time.Duration) (int64, error) {
	var epoch int64
	err := q.QueryRow(ctx, `UPDATE instances
		SET session_epoch = session_epoch + 1, session_expires_at = now() + $2 * interval '1 microsecond',
			session_renewed_at = now()
		WHERE id = $1 RETURNING session_epoch`, id, ttl.Microseconds()).Scan(&epoch)
	return epoch, interpret(err)
}

// InstancesRenewSession extends a live session to now() + ttl: the one
// write that renews every partition lease of the instance. ErrNotFound
// means the session expired or was replaced: its leases are lost.
func InstancesRenewSession(ctx context.Context, q DBTX, id string, epoch int64, ttl time.Duration) error {
	tag, err := q.Exec(ctx, `UPDATE instances SET session_expires_at = now() + $3 * interval '1 microsecond',
			session_renewed_at = now()
		WHERE id = $1 AND session_epoch = $2 AND session_expires_at > now()`, id, epoch, ttl.Microseconds())
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// InstancesReviveSession renews a session that expired but was neither
// replaced nor closed: an instance that kept its leases through a database
// outage, trusting them on its heartbeats (Spared kept them from being
// taken). A lease another instance took meanwhile stays taken; the
// instance's next lease renewal finds it gone. ErrNotFound means the
// session was replaced or closed.
func InstancesReviveSession(ctx context.Context, q DBTX, id string, epoch int64, ttl time.Duration) error {
	tag, err := q.Exec(ctx, `UPDATE instances SET session_expires_at = now() + $3 * interval '1 microsecond',
			session_renewed_at = now()
		WHERE id = $1 AND session_epoch = $2 AND session_expires_at IS NOT NULL`, id, epoch, ttl.Microseconds())
	if err != nil {
		return interpret(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// InstancesCloseSession ends a session after its leases were released, so
// other instances stop counting this one at once.
func InstancesCloseSession(ctx context.Context, q DBTX, id string, epoch int64) error {
	_, err := q.Exec(ctx, `UPDATE instances SET session_expires_at = NULL
		WHERE id = $1 AND session_epoch = $2`, id, epoch)
	return interpret(err)
}

// PartitionsOwned lists the partition leases a session holds, with whether
// each partition still needs a worker. It only reads: it takes no row lock
// and waits on none, so busy partition rows cannot delay a renewal.
func PartitionsOwned(ctx context.Context, q DBTX, owner string, session int64) ([]PartitionLeaseRow, error) {
	rows, err := q.Query(ctx, `
		SELECT p.mirror, p.topic, p.partition, p.lease_epoch, `+activePartition+`, ''
		FROM mirror_partitions p
		JOIN mirror_topics t ON t.mirror = p.mirror AND t.topic = p.topic
		WHERE p.lease_owner = $1 AND p.lease_session = $2`, owner, session)
	if err != nil {
		return nil, interpret(err)
	}
	return scanPartitionLeases(rows)
}

// Spared says which expired sessions' leases (partition and metadata) are
// not free yet: those of owners that may still be copying through a
// database outage, trusting their leases on the destination cluster's
// heartbeats. A session
// is spared while it expired less than Grace ago and either All is set
// (this instance cannot tell who is alive) or it is one of Owners'
// Sessions (alive by its heartbeats). The zero value spares none.
type Spared struct {
	Grace    time.Duration
	All      bool
	Owners   []string
	Sessions []int64
	// Ends is when the first of Owners stops being spared, for the
	// caller to try again then (zero: none is); not a statement's.
	Ends time.Time
}

// sparedLease is true for a lease (its owner and session columns) that
// Spared, as parameters $4 to $7 (Grace in microseconds, All, Owners,
// Sessions), leaves to its owner.
func sparedLease(owner, session string) string {
	return `(` + owner + ` IS NOT NULL AND $4 > 0 AND EXISTS (
		SELECT 1 FROM instances i WHERE i.id = ` + owner + ` AND i.session_epoch = ` + session + `
		  AND i.session_expires_at > now() - $4 * interval '1 microsecond'
		  AND ($5 OR (i.id, i.session_epoch) IN (SELECT * FROM unnest($6::text[], $7::bigint[])))))`
}

// PartitionsAcquireLeases takes up to limit free leases of active
// partitions for owner's session, incrementing each one's epoch. A lease is
// free when no live session holds it and spare does not spare it.
// Candidates are locked in primary-key order, and rows another transaction
// is locking are skipped, so concurrent instances never wait on each other
// or deadlock.
func PartitionsAcquireLeases(ctx context.Context, q DBTX, owner string, session int64, limit int, spare Spared) ([]PartitionLeaseRow, error) {
	return acquirePartitionLeases(ctx, q, `(p.lease_owner IS NULL OR NOT `+leaseHeld+`)`,
		owner, session, limit, spare.Grace.Microseconds(), spare.All, spare.Owners, spare.Sessions)
}

// acquirePartitionLeases takes up to $3 leases of active partitions that
// free ($8 on) says are free and spare ($4 to $7) does not spare, for
// owner $1's session $2, in primary-key order, skipping locked rows.
func acquirePartitionLeases(ctx context.Context, q DBTX, free string, args ...any) ([]PartitionLeaseRow, error) {
	rows, err := q.Query(ctx, `
		UPDATE mirror_partitions up
		SET lease_owner = $1, lease_session = $2, lease_epoch = up.lease_epoch + 1, last_owner = $1
		FROM (
			SELECT p.mirror, p.topic, p.partition, coalesce(p.last_owner, '') AS previous
			FROM mirror_partitions p
			JOIN mirror_topics t ON t.mirror = p.mirror AND t.topic = p.topic
			WHERE `+free+`
			  AND NOT `+sparedLease("p.lease_owner", "p.lease_session")+`
			  AND `+activePartition+`
			ORDER BY p.mirror, p.topic, p.partition
			LIMIT $3
			FOR UPDATE OF p SKIP LOCKED
		) c
		WHERE up.mirror = c.mirror AND up.topic = c.topic AND up.partition = c.partition
		RETURNING up.mirror, up.topic, up.partition, up.lease_epoch, true, c.previous`, args...)
	if err != nil {
		return nil, interpret(err)
	}
	return scanPartitionLeases(rows)
}

// PartitionsAcquireOrphanedLeases is PartitionsAcquireLeases for orphaned
// leases only: those of a session that expired at least orphanedAfter ago
// (or was replaced, or whose instance is gone), which an instance takes
// beyond its fair share. The instance whose share they are may not be able
// to take them: one that has just started spares, for a while, every
// session whose heartbeat it read, and the others, counting it, would
// otherwise leave them for it (repo.Spared); the one that took them hands
// them back once over its share, free for the first to take.
func PartitionsAcquireOrphanedLeases(ctx context.Context, q DBTX, owner string, session int64, limit int, spare Spared, orphanedAfter time.Duration) ([]PartitionLeaseRow, error) {
	return acquirePartitionLeases(ctx, q, `p.lease_owner IS NOT NULL AND p.lease_owner <> $1
			  AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = p.lease_owner
				AND i.session_epoch = p.lease_session
				AND i.session_expires_at > now() - $8 * interval '1 microsecond')`,
		owner, session, limit, spare.Grace.Microseconds(), spare.All, spare.Owners, spare.Sessions, orphanedAfter.Microseconds())
}

// PartitionsReleaseLeases gives back leases owner holds at the given epochs,
// locking them in primary-key order. The epoch stays, so the next owner
// takes the lease at epoch + 1. It returns how many leases were released;
// one that was already lost is not an error.
func PartitionsReleaseLeases(ctx context.Context, q DBTX, owner string, held []PartitionLeaseRow) (int64, error) {
	mirrors, topics, partitions, epochs := partitionLeaseArrays(held)
	tag, err := q.Exec(ctx, `
		WITH c AS (
			SELECT p.mirror, p.topic, p.partition
			FROM mirror_partitions p
			JOIN unnest($2::text[], $3::text[], $4::int[], $5::bigint[]) AS h (mirror, topic, partition, epoch)
				ON p.mirror = h.mirror AND p.topic = h.topic AND p.partition = h.partition
			WHERE p.lease_owner = $1 AND p.lease_epoch = h.epoch
			ORDER BY p.mirror, p.topic, p.partition
			FOR UPDATE OF p
		)
		UPDATE mirror_partitions p SET lease_owner = NULL, lease_session = NULL
		FROM c WHERE p.mirror = c.mirror AND p.topic = c.topic AND p.partition = c.partition`,
		owner, mirrors, topics, partitions, epochs)
	if err != nil {
		return 0, interpret(err)
	}
	return tag.RowsAffected(), nil
}

// MirrorsOwnedMetaLeases lists the metadata-sync leases a session holds.
// It only reads, as PartitionsOwned does.
func MirrorsOwnedMetaLeases(ctx context.Context, q DBTX, owner string, session int64) ([]MirrorLeaseRow, error) {
	rows, err := q.Query(ctx, `SELECT name, meta_lease_epoch FROM mirrors
		WHERE meta_lease_owner = $1 AND meta_lease_session = $2`, owner, session)
	if err != nil {
		return nil, interpret(err)
	}
	return scanMirrorLeases(rows)
}

// MirrorsAcquireMetaLeases takes up to limit free metadata-sync leases for
// owner's session, incrementing each one's epoch. A lease is free when no
// live session holds it and spare does not spare it. Every mirror needs
// one, except one that needs credentials.
func MirrorsAcquireMetaLeases(ctx context.Context, q DBTX, owner string, session int64, limit int, spare Spared) ([]MirrorLeaseRow, error) {
	rows, err := q.Query(ctx, `
		UPDATE mirrors m
		SET meta_lease_owner = $1, meta_lease_session = $2, meta_lease_epoch = m.meta_lease_epoch + 1
		FROM (
			SELECT name FROM mirrors
			WHERE (meta_lease_owner IS NULL OR NOT `+metaLeaseHeld+`)
			  AND NOT `+sparedLease("meta_lease_owner", "meta_lease_session")+`
			  AND `+syncableMirror+`
			ORDER BY name
			LIMIT $3
			FOR UPDATE SKIP LOCKED
		) c
		WHERE m.name = c.name
		RETURNING m.name, m.meta_lease_epoch`,
		owner, session, limit, spare.Grace.Microseconds(), spare.All, spare.Owners, spare.Sessions)
	if err != nil {
		return nil, interpret(err)
	}
	return scanMirrorLeases(rows)
}

// MirrorsReleaseMetaLeases is PartitionsReleaseLeases for mirrors'
// metadata-sync leases.
func MirrorsReleaseMetaLeases(ctx context.Context, q DBTX, owner string, held []MirrorLeaseRow) (int64, error) {
	names, epochs := mirrorLeaseArrays(held)
	tag, err := q.Exec(ctx, `
		UPDATE mirrors m SET meta_lease_owner = NULL, meta_lease_session = NULL
		FROM unnest($2::text[], $3::bigint[]) AS h (name, epoch)
		WHERE m.name = h.name AND m.meta_lease_owner = $1 AND m.meta_lease_epoch = h.epoch`,
		owner, names, epochs)
	if err != nil {
		return 0, interpret(err)
	}
	return tag.RowsAffected(), nil
}

// LeaseDemand is what an instance needs to compute its fair share.
type LeaseDemand struct {
	// ActivePartitions counts the partitions that need a worker.
	ActivePartitions int
	// Mirrors counts the mirrors, each needing a metadata-sync lease.
	Mirrors int
	// LiveInstances counts the instances with a live session that take
	// leases and are not stopping, always including the asking instance.
	LiveInstances int
	// NextExpiry is how long, by the database's clock, until the first of
	// the other instances' live sessions expires (0: none is live). An
	// instance that renews is always most of a TTL away; one that stopped
	// renewing (crashed) comes closer, and its leases are free from then.
	NextExpiry time.Duration
	// NextOrphaned is how long, by the database's clock, until partition
	// leases of a session that has expired become orphaned (expired for
	// orphanedAfter; 0: none will), for PartitionsAcquireOrphanedLeases.
	NextOrphaned time.Duration
	// Orphaned says partition leases of a session that expired at least
	// orphanedAfter ago are still there: nobody took them.
	Orphaned bool
}

// LeasesCountDemand counts, in one statement, the active partitions, the
// mirrors and the instances with a live session that take leases and
// have not begun to stop, and when the first other session expires.
// instanceID counts as live whatever its session says.
func LeasesCountDemand(ctx context.Context, q DBTX, instanceID string, orphanedAfter time.Duration) (LeaseDemand, error) {
	var d LeaseDemand
	var expiry, orphaned float64
	err := q.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM mirror_partitions p
			JOIN mirror_topics t ON t.mirror = p.mirror AND t.topic = p.topic
			WHERE `+activePartition+`),
		(SELECT count(*) FROM mirrors WHERE `+syncableMirror+`),
		1 + (SELECT count(*) FROM instances
			WHERE id <> $1 AND takes_leases AND stopped_at IS NULL AND session_expires_at > now()),
		(SELECT coalesce(extract(epoch FROM min(session_expires_at) - now()), 0)::float8 FROM instances
			WHERE id <> $1 AND takes_leases AND session_expires_at > now()),
		(SELECT coalesce(extract(epoch FROM min(i.session_expires_at) + $2 * interval '1 microsecond' - now()), 0)::float8
			FROM instances i
			WHERE i.id <> $1 AND i.session_expires_at <= now()
			  AND i.session_expires_at + $2 * interval '1 microsecond' > now()
			  AND EXISTS (SELECT 1 FROM mirror_partitions p WHERE p.lease_owner = i.id AND p.lease_session = i.session_epoch)),
		EXISTS (SELECT 1 FROM instances i
			WHERE i.id <> $1 AND i.session_expires_at <= now() - $2 * interval '1 microsecond'
			  AND EXISTS (SELECT 1 FROM mirror_partitions p WHERE p.lease_owner = i.id AND p.lease_session = i.session_epoch))`,
		instanceID, orphanedAfter.Microseconds()).Scan(&d.ActivePartitions, &d.Mirrors, &d.LiveInstances, &expiry, &orphaned, &d.Orphaned)
	d.NextExpiry = time.Duration(expiry * float64(time.Second))
	d.NextOrphaned = time.Duration(orphaned * float64(time.Second))
	return d, interpret(err)
}

func partitionLeaseArrays(held []PartitionLeaseRow) (mirrors, topics []string, partitions []int32, epochs []int64) {
	mirrors = make([]string, len(held))
	topics = make([]string, len(held))
	partitions = make([]int32, len(held))
	epochs = make([]int64, len(held))
	for i, l := range held {
		mirrors[i], topics[i], partitions[i], epochs[i] = l.Mirror, l.Topic, l.Partition, l.Epoch
	}
	return mirrors, topics, partitions, epochs
}

func mirrorLeaseArrays(held []MirrorLeaseRow) (names []string, epochs []int64) {
	names = make([]string, len(held))
	epochs = make([]int64, len(held))
	for i, l := range held {
		names[i], epochs[i] = l.Mirror, l.Epoch
	}
	return names, epochs
}

func scanPartitionLeases(rows pgx.Rows) ([]PartitionLeaseRow, error) {
	defer rows.Close()
	var out []PartitionLeaseRow
	for rows.Next() {
		var l PartitionLeaseRow
		if err := rows.Scan(&l.Mirror, &l.Topic, &l.Partition, &l.Epoch, &l.Active, &l.PreviousOwner); err != nil {
			return nil, interpret(err)
		}
		out = append(out, l)
	}
	return out, interpret(rows.Err())
}

func scanMirrorLeases(rows pgx.Rows) ([]MirrorLeaseRow, error) {
	defer rows.Close()
	var out []MirrorLeaseRow
	for rows.Next() {
		var l MirrorLeaseRow
		if err := rows.Scan(&l.Mirror, &l.Epoch); err != nil {
			return nil, interpret(err)
		}
		out = append(out, l)
	}
	return out, interpret(rows.Err())
}
