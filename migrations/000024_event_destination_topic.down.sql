DROP TRIGGER IF EXISTS events_destination_topic ON events;
DROP FUNCTION IF EXISTS kmirror_event_destination_topic();
ALTER TABLE events DROP COLUMN IF EXISTS destination_topic;
