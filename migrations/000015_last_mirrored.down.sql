ALTER TABLE mirror_partitions
    DROP CONSTRAINT IF EXISTS mirror_partitions_last_mirrored_check,
    DROP COLUMN IF EXISTS last_mirrored_dst,
    DROP COLUMN IF EXISTS last_mirrored_src;
