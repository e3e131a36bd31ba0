ALTER TABLE mirror_partitions DROP COLUMN IF EXISTS source_end_at;
