-- An event's id is taken after its transaction has an id of its own, so
-- that a reader can tell when no event with a lower id can still commit:
-- once every transaction that was running after the sequence reached N has
-- ended (repo.EventsHorizon). Without this, the id came first (the
-- column's default is evaluated before the row's insert assigns the
-- transaction id), and a transaction could hold an id for a moment while
-- invisible to the snapshots the reader judges by.
CREATE FUNCTION kmirror_event_id() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval('events_id_seq');
END
$$;

ALTER TABLE events ALTER COLUMN id SET DEFAULT kmirror_event_id();
