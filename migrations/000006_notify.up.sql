-- One NOTIFY per statement that changes what a component waits for, so that
-- an API action takes effect at once instead of at the next poll. There is
-- no payload: a listener re-reads what it watches.

-- kmirror_notify NOTIFYs the channel named by the trigger's argument.
CREATE FUNCTION kmirror_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END;
$$;

-- Desired states: mirror topics added or removed, or their desire changed.
CREATE TRIGGER mirror_topics_notify_desired
    AFTER INSERT OR DELETE OR UPDATE OF desired_state, recreate ON mirror_topics
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify('kmirror_desired');

-- Lease demand: partitions to lease appear or go, or stop needing a worker.
CREATE TRIGGER mirror_partitions_notify_lease_demand
    AFTER INSERT OR DELETE ON mirror_partitions
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify('kmirror_lease_demand');

CREATE TRIGGER mirror_partitions_notify_stopped
    AFTER UPDATE OF state ON mirror_partitions
    FOR EACH ROW WHEN (NEW.state = 'STOPPED' AND OLD.state IS DISTINCT FROM 'STOPPED')
    EXECUTE FUNCTION kmirror_notify('kmirror_lease_demand');

-- A "sync now" request.
CREATE TRIGGER mirrors_notify_sync
    AFTER UPDATE OF sync_requested_at ON mirrors
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify('kmirror_sync');

-- New outbox rows for the relay.
CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION kmirror_notify('kmirror_outbox');
