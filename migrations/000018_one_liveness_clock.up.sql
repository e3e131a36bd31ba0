-- One liveness clock per instance: its session (migration 000007). The
-- heartbeat column goes (an instance is live while its session is), and a
-- mirror's metadata lease hangs on its owner's session as partition leases
-- do, instead of keeping an expiry of its own.
ALTER TABLE instances
    DROP COLUMN heartbeat_at,
    -- takes_leases: false for an instance that runs only the control plane
    -- (no destination): live, listed, but not counted when leases are shared.
    ADD COLUMN takes_leases boolean NOT NULL DEFAULT true;

-- Leases held under the old expiry are free from here: their owners take
-- them again at their next pass.
ALTER TABLE mirrors
    DROP COLUMN meta_lease_expires_at,
    ADD COLUMN meta_lease_session bigint;
