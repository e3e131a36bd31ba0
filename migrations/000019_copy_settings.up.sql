-- The data plane reads two mirror configs (mirror.compression.type and
-- mirror.replication.throttled.rate) with the desired states, so a change
-- to a mirror's config wakes the desired-state cache at once, as a topic's
-- desire does, and a PATCH takes effect within a round trip.
CREATE TRIGGER mirrors_notify_desired
    AFTER UPDATE OF config ON mirrors
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify('kmirror_desired');

-- throttled_ms: how long this partition's copies have waited for the
-- mirror's replication throttle, in total since it was added.
ALTER TABLE mirror_partitions
    ADD COLUMN throttled_ms bigint NOT NULL DEFAULT 0 CHECK (throttled_ms >= 0);
