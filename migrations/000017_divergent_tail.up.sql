-- keep_divergent: the topic was added with continue and "keep_divergent": a
-- destination partition holding records past the last mirrored offset that
-- the source never had (a divergent tail, left by an unplanned failover)
-- continues after them instead of failing.
ALTER TABLE mirror_topics ADD COLUMN keep_divergent boolean NOT NULL DEFAULT false;

-- The divergent tail a partition kept: destination offsets [start, end)
-- holding records, which no source offset maps to. Kept so that someone can
-- reprocess them, and so that translation rounds down across them.
ALTER TABLE mirror_partitions
    ADD COLUMN divergent_tail_start bigint CHECK (divergent_tail_start >= 0),
    ADD COLUMN divergent_tail_end bigint,
    ADD COLUMN divergent_tail_records bigint CHECK (divergent_tail_records > 0),
    ADD CONSTRAINT mirror_partitions_divergent_tail_check
        CHECK ((divergent_tail_start IS NULL) = (divergent_tail_end IS NULL)
           AND (divergent_tail_start IS NULL) = (divergent_tail_records IS NULL)
           AND divergent_tail_end > divergent_tail_start);
