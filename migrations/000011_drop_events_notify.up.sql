-- Nothing LISTENs to kmirror_events (the event stream reads the table), but
-- every event row still queued a notification, one per row since each
-- carried its id: at 10,000 partitions starting, 20,000 entries in the
-- server's notification queue, all written at commit under its lock.
DROP TRIGGER IF EXISTS events_notify ON events;
DROP FUNCTION IF EXISTS kmirror_notify_event();
