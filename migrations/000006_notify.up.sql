-- One NOTIFY per statement that changes what a component waits for, so that
-- an API action takes effect at once instead of at the next poll. Payloads
-- are hints only: listeners re-read the rows.

CREATE FUNCTION kmirror_notify_desired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kmirror_desired', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER mirror_topics_notify_desired
    AFTER INSERT OR DELETE OR UPDATE OF desired_state, recreate ON mirror_topics
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify_desired();

-- Lease demand: partitions to lease appear or go, or stop needing a worker.
CREATE FUNCTION kmirror_notify_lease_demand() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kmirror_lease_demand', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER mirror_partitions_notify_lease_demand
    AFTER INSERT OR DELETE ON mirror_partitions
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify_lease_demand();

CREATE TRIGGER mirror_partitions_notify_stopped
    AFTER UPDATE OF state ON mirror_partitions
    FOR EACH ROW WHEN (NEW.state = 'STOPPED' AND OLD.state IS DISTINCT FROM 'STOPPED')
    EXECUTE FUNCTION kmirror_notify_lease_demand();

CREATE FUNCTION kmirror_notify_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kmirror_sync', NEW.name);
    RETURN NULL;
END;
$$;

CREATE TRIGGER mirrors_notify_sync
    AFTER UPDATE OF sync_requested_at ON mirrors
    FOR EACH ROW EXECUTE FUNCTION kmirror_notify_sync();

CREATE FUNCTION kmirror_notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kmirror_outbox', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify_outbox();
