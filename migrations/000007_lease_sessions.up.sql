-- Partition leases hang on the owning instance's session: one row per
-- instance, renewed in one O(1) write, instead of a lease_expires_at per
-- partition renewed in one write per owned row. A partition is leased while
-- its lease_owner's session is still lease_session and has not expired;
-- lease_epoch still fences every write a worker makes.
ALTER TABLE instances
    ADD COLUMN session_epoch bigint NOT NULL DEFAULT 0 CHECK (session_epoch >= 0),
    ADD COLUMN session_expires_at timestamptz,
    ADD COLUMN session_renewed_at timestamptz;

ALTER TABLE mirror_partitions ADD COLUMN lease_session bigint;
-- Also drops the index on it (so updates to the row can be HOT again) and
-- the check pairing it with lease_owner.
ALTER TABLE mirror_partitions DROP COLUMN lease_expires_at;
-- Leases taken before this migration lapse: their owners take them again
-- under a session.
UPDATE mirror_partitions SET lease_owner = NULL WHERE lease_owner IS NOT NULL;
ALTER TABLE mirror_partitions ADD CONSTRAINT mirror_partitions_lease_session_check
    CHECK ((lease_owner IS NULL) = (lease_session IS NULL));

-- The last instance to take the lease, kept across releases, so that a new
-- owner can say whom it took over from.
ALTER TABLE mirror_partitions ADD COLUMN last_owner text;

-- When the checkpoint last moved forward, so describe can tell a partition
-- that makes progress from one that only looks healthy.
ALTER TABLE mirror_partitions ADD COLUMN progressed_at timestamptz;
