-- The audit trail: who made a change (the API token's name, never the
-- token), from which address, and the API request id. NULL for the events
-- kmirror's own workers record.
ALTER TABLE events
    ADD COLUMN actor       text,
    ADD COLUMN remote_addr text,
    ADD COLUMN request_id  text;

-- GET /v1/events?actor= reads one actor's events in id order.
CREATE INDEX events_actor_idx ON events (actor, id) WHERE actor IS NOT NULL;
