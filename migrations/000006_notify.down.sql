DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION kmirror_notify_outbox();
DROP TRIGGER mirrors_notify_sync ON mirrors;
DROP FUNCTION kmirror_notify_sync();
DROP TRIGGER mirror_partitions_notify_stopped ON mirror_partitions;
DROP TRIGGER mirror_partitions_notify_lease_demand ON mirror_partitions;
DROP FUNCTION kmirror_notify_lease_demand();
DROP TRIGGER mirror_topics_notify_desired ON mirror_topics;
DROP FUNCTION kmirror_notify_desired();
