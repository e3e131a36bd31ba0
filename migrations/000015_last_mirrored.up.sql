-- The last mirrored offsets: the source and destination offsets of the
-- last record copied, which is the end of the partition's offset map (the
-- checkpoint's src_next may have moved past transaction markers, which are
-- never copied). Kept on the row so that describe reads them without
-- touching offset_map_runs, and so that they stay once a partition is
-- STOPPED: they are where a failback continues from. Written by every state
-- change and checkpoint save; NULL while nothing was ever copied.
ALTER TABLE mirror_partitions
    ADD COLUMN last_mirrored_src bigint CHECK (last_mirrored_src >= 0),
    ADD COLUMN last_mirrored_dst bigint CHECK (last_mirrored_dst >= 0),
    ADD CONSTRAINT mirror_partitions_last_mirrored_check
        CHECK ((last_mirrored_src IS NULL) = (last_mirrored_dst IS NULL));

-- Rows from before: the end of each partition's map.
UPDATE mirror_partitions p
SET last_mirrored_src = e.src_start + e.count - 1, last_mirrored_dst = e.dst_start + e.count - 1
FROM (SELECT DISTINCT ON (mirror, topic, partition) mirror, topic, partition, src_start, dst_start, count
      FROM offset_map_runs ORDER BY mirror, topic, partition, src_start DESC) e
WHERE p.mirror = e.mirror AND p.topic = e.topic AND p.partition = e.partition;
