-- handed_back_dst: the destination offset at which the previous owner
-- handed the partition back cleanly (every copy answered, the checkpoint
-- saved at it), NULL otherwise. The next owner that finds the destination
-- ending there resumes without reading records back. Any later checkpoint
-- or state change clears it.
--
-- aligned_epoch: the lease epoch under which the partition was last
-- aligned. A partition MIRRORING, PAUSING or STOPPING under a newer epoch
-- is being re-aligned by its new owner, which describe shows.
ALTER TABLE mirror_partitions
    ADD COLUMN handed_back_dst bigint,
    ADD COLUMN aligned_epoch bigint;
UPDATE mirror_partitions SET aligned_epoch = lease_epoch;
