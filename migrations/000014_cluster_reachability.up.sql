-- Whether kmirror reaches each Kafka cluster, as its probes last found:
-- written only when the answer changes, so a healthy deployment writes
-- nothing. Readiness stays about PostgreSQL alone; these feed each mirror's
-- status and kmirror_cluster_reachable.

-- A mirror's source, probed by the holder of its metadata lease. The value
-- counts only while the instance and lease epoch that recorded it still
-- hold the lease: a holder that died leaves it unknown, not stale.
ALTER TABLE mirrors
    ADD COLUMN source_reachable boolean,
    ADD COLUMN source_reachable_since timestamptz,
    ADD COLUMN source_reachability_error text,
    ADD COLUMN source_reachability_owner text,
    ADD COLUMN source_reachability_epoch bigint;

-- The destination, probed by every instance. The value counts only while
-- the instance's session is live.
ALTER TABLE instances
    ADD COLUMN destination_reachable boolean,
    ADD COLUMN destination_reachable_since timestamptz,
    ADD COLUMN destination_reachability_error text;
