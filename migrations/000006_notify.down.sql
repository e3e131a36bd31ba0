DROP TRIGGER outbox_notify ON outbox;
DROP TRIGGER mirrors_notify_sync ON mirrors;
DROP TRIGGER mirror_partitions_notify_stopped ON mirror_partitions;
DROP TRIGGER mirror_partitions_notify_lease_demand ON mirror_partitions;
DROP TRIGGER mirror_topics_notify_desired ON mirror_topics;
DROP FUNCTION kmirror_notify();
