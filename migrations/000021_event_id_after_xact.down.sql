ALTER TABLE events ALTER COLUMN id SET DEFAULT nextval('events_id_seq');
DROP FUNCTION IF EXISTS kmirror_event_id();
