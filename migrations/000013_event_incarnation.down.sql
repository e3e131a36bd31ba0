DROP TRIGGER IF EXISTS events_mirror_incarnation ON events;
DROP FUNCTION IF EXISTS kmirror_event_incarnation();
ALTER TABLE events DROP COLUMN IF EXISTS mirror_incarnation;
-- Drops mirror_incarnation_seq with it (OWNED BY).
ALTER TABLE mirrors DROP COLUMN IF EXISTS incarnation;
