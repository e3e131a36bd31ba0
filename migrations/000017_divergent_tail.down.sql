ALTER TABLE mirror_partitions
    DROP CONSTRAINT IF EXISTS mirror_partitions_divergent_tail_check,
    DROP COLUMN IF EXISTS divergent_tail_records,
    DROP COLUMN IF EXISTS divergent_tail_end,
    DROP COLUMN IF EXISTS divergent_tail_start;
ALTER TABLE mirror_topics DROP COLUMN keep_divergent;
