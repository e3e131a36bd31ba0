DROP INDEX IF EXISTS events_actor_idx;
ALTER TABLE events
    DROP COLUMN IF EXISTS request_id,
    DROP COLUMN IF EXISTS remote_addr,
    DROP COLUMN IF EXISTS actor;
