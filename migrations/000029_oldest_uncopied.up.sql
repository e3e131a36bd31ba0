-- Lag in time (docs/design.md, "RPO"): the timestamp of the first committed
-- data record at or after source offset oldest_uncopied_src, as the owner
-- last read it. It stands for the partition's oldest record not yet on the
-- destination only while oldest_uncopied_src equals src_next; a NULL
-- timestamp with oldest_uncopied_src = src_next says that no data record
-- (only markers or aborted records) lay between src_next and the source
-- end when it was read. The age is computed when read, from the database's
-- clock, so it keeps growing while nothing writes (paused, failed, source
-- down).
ALTER TABLE mirror_partitions
    ADD COLUMN oldest_uncopied_src bigint,
    ADD COLUMN oldest_uncopied_at timestamptz;
