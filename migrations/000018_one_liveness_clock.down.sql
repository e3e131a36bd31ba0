ALTER TABLE mirrors
    DROP COLUMN meta_lease_session,
    ADD COLUMN meta_lease_expires_at timestamptz;
ALTER TABLE instances
    DROP COLUMN takes_leases,
    ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
