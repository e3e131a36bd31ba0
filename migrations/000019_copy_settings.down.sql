ALTER TABLE mirror_partitions DROP COLUMN throttled_ms;
DROP TRIGGER mirrors_notify_desired ON mirrors;
