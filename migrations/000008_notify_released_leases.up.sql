-- A lease handed back (a graceful stop, a rebalance) is lease demand too, and
-- so is a session that ends (the stopping instance no longer counts in the
-- fair share): without a NOTIFY the other instances took over only at their
-- next poll, about 5 s later. Postgres folds identical notifications of a
-- transaction into one, so a row trigger sends one per statement.
CREATE TRIGGER mirror_partitions_notify_released
    AFTER UPDATE OF lease_owner ON mirror_partitions
    FOR EACH ROW WHEN (OLD.lease_owner IS NOT NULL AND NEW.lease_owner IS NULL)
    EXECUTE FUNCTION kmirror_notify('kmirror_lease_demand');

CREATE TRIGGER mirrors_notify_meta_released
    AFTER UPDATE OF meta_lease_owner ON mirrors
    FOR EACH ROW WHEN (OLD.meta_lease_owner IS NOT NULL AND NEW.meta_lease_owner IS NULL)
    EXECUTE FUNCTION kmirror_notify('kmirror_lease_demand');

CREATE TRIGGER instances_notify_session_closed
    AFTER UPDATE OF session_expires_at ON instances
    FOR EACH ROW WHEN (OLD.session_expires_at IS NOT NULL AND NEW.session_expires_at IS NULL)
    EXECUTE FUNCTION kmirror_notify('kmirror_lease_demand');
