DROP TRIGGER IF EXISTS events_notify ON events;
DROP FUNCTION IF EXISTS kmirror_notify_event();
DROP TABLE IF EXISTS events;
DROP TABLE IF EXISTS outbox;
DROP TABLE IF EXISTS instances;
DROP TABLE IF EXISTS offset_map_runs;
DROP TABLE IF EXISTS mirror_partitions;
DROP TABLE IF EXISTS mirror_topics;
DROP TABLE IF EXISTS mirrors;
