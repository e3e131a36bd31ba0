ALTER TABLE mirror_partitions DROP CONSTRAINT mirror_partitions_lease_session_check;
UPDATE mirror_partitions SET lease_owner = NULL WHERE lease_owner IS NOT NULL;
ALTER TABLE mirror_partitions ADD COLUMN lease_expires_at timestamptz;
ALTER TABLE mirror_partitions ADD CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL));
CREATE INDEX mirror_partitions_lease_idx ON mirror_partitions (lease_expires_at);
ALTER TABLE mirror_partitions DROP COLUMN lease_session, DROP COLUMN last_owner, DROP COLUMN progressed_at;
ALTER TABLE instances DROP COLUMN session_renewed_at, DROP COLUMN session_expires_at, DROP COLUMN session_epoch;
