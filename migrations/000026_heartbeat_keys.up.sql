-- heartbeat_keys are the keys the instances of this deployment sign their
-- heartbeats with (HMAC-SHA256), so that a client that can write the
-- destination's __mirror_heartbeats cannot speak for an instance. Only the
-- database holds them. A key signs from signs_from on (the newest such key
-- signs); every key the instances have read verifies. A rotation
-- (`kmirror heartbeats rotate-key`) adds a key that signs a minute later,
-- by which time every instance that can reach the database has read it.
CREATE TABLE heartbeat_keys (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key bytea NOT NULL CHECK (length(key) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    signs_from timestamptz NOT NULL DEFAULT now()
);
-- The first key signs at once: two of PostgreSQL's strong random UUIDs
-- (gen_random_uuid uses pg_strong_random), 244 random bits.
INSERT INTO heartbeat_keys (key) VALUES (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
