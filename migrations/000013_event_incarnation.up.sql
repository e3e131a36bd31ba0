-- A mirror's incarnation tells it from an earlier, deleted mirror of the
-- same name: each creation takes the next value of the sequence. Every event
-- about a mirror records the incarnation it was about, so that a filter by
-- name serves the current mirror's events, not a namesake's.
CREATE SEQUENCE mirror_incarnation_seq;
ALTER TABLE mirrors ADD COLUMN incarnation bigint NOT NULL DEFAULT nextval('mirror_incarnation_seq');
ALTER SEQUENCE mirror_incarnation_seq OWNED BY mirrors.incarnation;

ALTER TABLE events ADD COLUMN mirror_incarnation bigint;

-- Earlier events of a mirror that exists are its own from its creation on
-- (its mirror.created event was written in the creating transaction, so at
-- equals created_at); older ones were a deleted namesake's and stay NULL.
UPDATE events e SET mirror_incarnation = m.incarnation
FROM mirrors m
WHERE e.mirror = m.name AND e.at >= m.created_at;

-- Events are written in many places, some built in SQL; this fills in the
-- incarnation of any that does not say it. A mirror's delete event is
-- written after its row is gone: it takes the incarnation of the mirror's
-- latest event (its creation event at the least).
CREATE FUNCTION kmirror_event_incarnation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.mirror_incarnation := coalesce(
        (SELECT incarnation FROM mirrors WHERE name = NEW.mirror),
        (SELECT mirror_incarnation FROM events WHERE mirror = NEW.mirror ORDER BY id DESC LIMIT 1));
    RETURN NEW;
END
$$;

CREATE TRIGGER events_mirror_incarnation BEFORE INSERT ON events
    FOR EACH ROW
    WHEN (NEW.mirror IS NOT NULL AND NEW.mirror_incarnation IS NULL)
    EXECUTE FUNCTION kmirror_event_incarnation();
