ALTER TABLE mirror_partitions DROP COLUMN oldest_uncopied_at, DROP COLUMN oldest_uncopied_src;
