ALTER TABLE mirror_partitions DROP COLUMN handed_back_dst, DROP COLUMN aligned_epoch;
