-- When source_end_offset last changed. Only a partition's owner lists its
-- source end every second or two; when those writes stop while the source
-- moves on (the owner died and its lease has not expired yet), the other
-- instances write the end instead, so lag grows in describe within seconds
-- rather than after the lease's TTL.
ALTER TABLE mirror_partitions ADD COLUMN source_end_at timestamptz;
