DROP TRIGGER IF EXISTS instances_notify_session_closed ON instances;
DROP TRIGGER IF EXISTS mirrors_notify_meta_released ON mirrors;
DROP TRIGGER IF EXISTS mirror_partitions_notify_released ON mirror_partitions;
