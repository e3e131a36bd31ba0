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

-- The ACLs the metadata sync created now reach __mirror_state as one set per
-- mirror, queued with every change. Queue the sets created before this
-- migration, so a restore knows them without waiting for a change.
INSERT INTO outbox (mirror, key, value)
SELECT mirror, 'acls/' || mirror, jsonb_build_object('version', 1, 'mirror', mirror, 'acls',
        jsonb_agg(jsonb_build_object('resource_type', resource_type, 'resource_name', resource_name,
            'pattern_type', pattern_type, 'principal', principal, 'host', host,
            'operation', operation, 'permission', permission)
            ORDER BY resource_type, resource_name, pattern_type, principal, host, operation, permission))
FROM synced_acls
GROUP BY mirror;
