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

// activePartition is true for a partition that needs a worker: everything but
// a stopped topic's partition that has finished stopping (or never started).
// It expects mirror_partitions as p and mirror_topics as t.
const activePartition = `NOT (t.desired_state = 'stopped' AND (p.state IS NULL OR p.state = 'STOPPED'))`

// PartitionLeaseRow names one leased mirror partition and its epoch.
type PartitionLeaseRow struct {
	Mirror    string
	Topic     string
	Partition int32
	Epoch     int64
	// Active is set by PartitionsRenewLeases and PartitionsAcquireLeases:
	// false when the partition no longer needs a worker and the lease should
	// be handed back.
	Active bool
}

// MirrorLeaseRow names one mirror's metadata-sync lease and its epoch.
type MirrorLeaseRow struct {
	Mirror string
	Epoch  int64
}

// PartitionsRenewLeases extends the given leases, which owner holds, to the
// database's now() + ttl. A lease comes back only while owner and epoch still
// match and it has not expired; a lease missing from the result is lost.
func PartitionsRenewLeases(ctx context.Context, q DBTX, owner string, ttl time.Duration, held []PartitionLeaseRow) ([]PartitionLeaseRow, error) {
	mirrors, topics, partitions, epochs := partitionLeaseArrays(held)
	rows, err := q.Query(ctx, `
		UPDATE mirror_partitions p
		SET lease_expires_at = now() + $2 * interval '1 microsecond'
		FROM unnest($3::text[], $4::text[], $5::int[], $6::bigint[]) AS h (mirror, topic, partition, epoch),
			mirror_topics t
		WHERE p.mirror = h.mirror AND p.topic = h.topic AND p.partition = h.partition
		  AND p.lease_owner = $1 AND p.lease_epoch = h.epoch AND p.lease_expires_at > now()
		  AND t.mirror = p.mirror AND t.topic = p.topic
		RETURNING p.mirror, p.topic, p.partition, p.lease_epoch, `+activePartition,
		owner, ttl.Microseconds(), mirrors, topics, partitions, epochs)
	if err != nil {
		return nil, interpret(err)
	}
	return scanPartitionLeases(rows)
}

// PartitionsAcquireLeases takes up to limit free or expired leases of active
// partitions for owner, incrementing each one's epoch. Rows another session
// is locking are skipped, so concurrent instances never wait on each other.
func PartitionsAcquireLeases(ctx context.Context, q DBTX, owner string, ttl time.Duration, limit int) ([]PartitionLeaseRow, error) {
	rows, err := q.Query(ctx, `
		UPDATE mirror_partitions up
		SET lease_owner = $1, lease_expires_at = now() + $2 * interval '1 microsecond',
			lease_epoch = up.lease_epoch + 1
		FROM (
			SELECT p.mirror, p.topic, p.partition
			FROM mirror_partitions p
			JOIN mirror_topics t ON t.mirror = p.mirror AND t.topic = p.topic
			WHERE (p.lease_owner IS NULL OR p.lease_expires_at <= now())
			  AND `+activePartition+`
			ORDER BY p.lease_expires_at NULLS FIRST, p.mirror, p.topic, p.partition
			LIMIT $3
			FOR UPDATE OF p SKIP LOCKED
		) c
		WHERE up.mirror = c.mirror AND up.topic = c.topic AND up.partition = c.partition
		RETURNING up.mirror, up.topic, up.partition, up.lease_epoch, true`,
		owner, ttl.Microseconds(), limit)
	if err != nil {
		return nil, interpret(err)
	}
	return scanPartitionLeases(rows)
}

// PartitionsReleaseLeases gives back leases owner holds at the given epochs.
// The epoch stays, so the next owner takes the lease at epoch + 1. It
// returns how many leases were released; one that was already lost is not
// an error.
func PartitionsReleaseLeases(ctx context.Context, q DBTX, owner string, held []PartitionLeaseRow) (int64, error) {
	mirrors, topics, partitions, epochs := partitionLeaseArrays(held)
	tag, err := q.Exec(ctx, `
		UPDATE mirror_partitions p SET lease_owner = NULL, lease_expires_at = NULL
		FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[]) AS h (mirror, topic, partition, epoch)
		WHERE p.mirror = h.mirror AND p.topic = h.topic AND p.partition = h.partition
		  AND p.lease_owner = $1 AND p.lease_epoch = h.epoch`,
		owner, mirrors, topics, partitions, epochs)
	if err != nil {
		return 0, interpret(err)
	}
	return tag.RowsAffected(), nil
}

// MirrorsRenewMetaLeases is PartitionsRenewLeases for mirrors' metadata-sync
// leases.
func MirrorsRenewMetaLeases(ctx context.Context, q DBTX, owner string, ttl time.Duration, held []MirrorLeaseRow) ([]MirrorLeaseRow, error) {
	names, epochs := mirrorLeaseArrays(held)
	rows, err := q.Query(ctx, `
		UPDATE mirrors m
		SET meta_lease_expires_at = now() + $2 * interval '1 microsecond'
		FROM unnest($3::text[], $4::bigint[]) AS h (name, epoch)
		WHERE m.name = h.name AND m.meta_lease_owner = $1 AND m.meta_lease_epoch = h.epoch
		  AND m.meta_lease_expires_at > now()
		RETURNING m.name, m.meta_lease_epoch`,
		owner, ttl.Microseconds(), names, epochs)
	if err != nil {
		return nil, interpret(err)
	}
	return scanMirrorLeases(rows)
}

// MirrorsAcquireMetaLeases takes up to limit free or expired metadata-sync
// leases for owner, incrementing each one's epoch. Every mirror needs one.
func MirrorsAcquireMetaLeases(ctx context.Context, q DBTX, owner string, ttl time.Duration, limit int) ([]MirrorLeaseRow, error) {
	rows, err := q.Query(ctx, `
		UPDATE mirrors m
		SET meta_lease_owner = $1, meta_lease_expires_at = now() + $2 * interval '1 microsecond',
			meta_lease_epoch = m.meta_lease_epoch + 1
		FROM (
			SELECT name FROM mirrors
			WHERE meta_lease_owner IS NULL OR meta_lease_expires_at IS NULL OR meta_lease_expires_at <= now()
			ORDER BY meta_lease_expires_at NULLS FIRST, name
			LIMIT $3
			FOR UPDATE SKIP LOCKED
		) c
		WHERE m.name = c.name
		RETURNING m.name, m.meta_lease_epoch`,
		owner, ttl.Microseconds(), limit)
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
		UPDATE mirrors m SET meta_lease_owner = NULL, meta_lease_expires_at = NULL
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
	// LiveInstances counts the instances with a heartbeat within the TTL
	// that have not stopped, always including the asking instance.
	LiveInstances int
}

// LeasesCountDemand counts, in one statement, the active partitions, the
// mirrors and the live instances. instanceID counts as live whatever its
// heartbeat says.
func LeasesCountDemand(ctx context.Context, q DBTX, instanceID string, instanceTTL time.Duration) (LeaseDemand, error) {
	var d LeaseDemand
	err := q.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM mirror_partitions p
			JOIN mirror_topics t ON t.mirror = p.mirror AND t.topic = p.topic
			WHERE `+activePartition+`),
		(SELECT count(*) FROM mirrors),
		1 + (SELECT count(*) FROM instances
			WHERE id <> $1 AND stopped_at IS NULL
			  AND heartbeat_at > now() - $2 * interval '1 microsecond')`,
		instanceID, instanceTTL.Microseconds()).Scan(&d.ActivePartitions, &d.Mirrors, &d.LiveInstances)
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
		if err := rows.Scan(&l.Mirror, &l.Topic, &l.Partition, &l.Epoch, &l.Active); err != nil {
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
