-- Secrets are never published to __mirror_state, so a mirror restored from
-- it lacks the ones it had. Until an operator enters them again (PATCH),
-- the mirror is needs_credentials: its partitions and its metadata sync
-- are not leased, rather than each failing on authentication.
ALTER TABLE mirrors
    ADD COLUMN missing_credentials text[] NOT NULL DEFAULT '{}'
        CHECK (missing_credentials <@ ARRAY['sasl_password', 'tls_key_pem']::text[]);

-- Entering them makes the mirror's partitions leasable again at once.
CREATE TRIGGER mirrors_notify_credentials
    AFTER UPDATE OF missing_credentials ON mirrors
    FOR EACH ROW WHEN (OLD.missing_credentials IS DISTINCT FROM NEW.missing_credentials)
    EXECUTE FUNCTION kmirror_notify('kmirror_lease_demand');
