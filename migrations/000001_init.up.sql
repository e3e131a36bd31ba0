-- kmirror's system of record. Every rule that can live in the database does:
-- names, states, offsets and ownership are constrained here, not only in Go.

CREATE TABLE mirrors (
    name                text PRIMARY KEY
                        CHECK (name ~ '^[a-zA-Z0-9._-]{1,249}$'),
    bootstrap_servers   text NOT NULL CHECK (bootstrap_servers <> ''),
    security_protocol   text NOT NULL DEFAULT 'PLAINTEXT'
                        CHECK (security_protocol IN ('PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL')),
    sasl_mechanism      text
                        CHECK (sasl_mechanism IN ('PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512')),
    sasl_username       text,
    -- Secrets are write-only through the API and never leave this table in clear.
    sasl_password       text,
    tls_ca_pem          text,
    tls_cert_pem        text,
    tls_key_pem         text,
    tls_server_name     text,
    config              jsonb NOT NULL DEFAULT '{}'::jsonb
                        CHECK (jsonb_typeof(config) = 'object'),
    -- Metadata-sync lease (one instance per mirror runs the sync pass).
    meta_lease_owner    text,
    meta_lease_epoch    bigint NOT NULL DEFAULT 0,
    meta_lease_expires_at timestamptz,
    last_sync           jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((sasl_mechanism IS NULL) = (security_protocol NOT IN ('SASL_PLAINTEXT', 'SASL_SSL')))
);

CREATE TABLE mirror_topics (
    mirror              text NOT NULL REFERENCES mirrors (name) ON DELETE CASCADE,
    topic               text NOT NULL
                        CHECK (topic ~ '^[a-zA-Z0-9._-]{1,249}$'),
    desired_state       text NOT NULL
                        CHECK (desired_state IN ('mirroring', 'paused', 'stopped')),
    -- -1 means "the destination cluster's default".
    replication_factor  integer NOT NULL DEFAULT -1
                        CHECK (replication_factor = -1 OR replication_factor BETWEEN 1 AND 32767),
    -- Set by a restart that asked to drop and recreate the destination topic;
    -- cleared by the worker once alignment has done it.
    recreate            boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mirror, topic)
);

CREATE TABLE mirror_partitions (
    mirror              text NOT NULL,
    topic               text NOT NULL,
    partition           integer NOT NULL CHECK (partition >= 0),
    -- NULL is UNKNOWN: the absence of state.
    state               text
                        CHECK (state IN ('PREPARING', 'MIRRORING', 'PAUSING', 'PAUSED', 'STOPPING', 'STOPPED', 'FAILED')),
    previous_state      text
                        CHECK (previous_state IN ('PREPARING', 'MIRRORING', 'PAUSING', 'PAUSED', 'STOPPING', 'STOPPED', 'FAILED')),
    error               text,
    retryable           boolean NOT NULL DEFAULT true,
    retry_attempt       integer NOT NULL DEFAULT 0 CHECK (retry_attempt >= 0),
    next_retry_at       timestamptz,
    lease_owner         text,
    lease_epoch         bigint NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0),
    lease_expires_at    timestamptz,
    -- Checkpoint: next source offset to read, next destination offset expected.
    src_next            bigint CHECK (src_next >= 0),
    dst_next            bigint CHECK (dst_next >= 0),
    source_end_offset   bigint CHECK (source_end_offset >= 0),
    destination_end_offset bigint CHECK (destination_end_offset >= 0),
    lost_records        bigint NOT NULL DEFAULT 0 CHECK (lost_records >= 0),
    state_changed_at    timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mirror, topic, partition),
    FOREIGN KEY (mirror, topic) REFERENCES mirror_topics (mirror, topic) ON DELETE CASCADE,
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CHECK ((src_next IS NULL) = (dst_next IS NULL))
);

CREATE INDEX mirror_partitions_lease_idx ON mirror_partitions (lease_expires_at);
CREATE INDEX mirror_partitions_owner_idx ON mirror_partitions (lease_owner) WHERE lease_owner IS NOT NULL;

-- Exact source→destination offset translation: each run maps count
-- consecutive committed source records starting at src_start to destination
-- offsets starting at dst_start.
CREATE TABLE offset_map_runs (
    mirror              text NOT NULL,
    topic               text NOT NULL,
    partition           integer NOT NULL,
    src_start           bigint NOT NULL CHECK (src_start >= 0),
    dst_start           bigint NOT NULL CHECK (dst_start >= 0),
    count               bigint NOT NULL CHECK (count > 0),
    PRIMARY KEY (mirror, topic, partition, src_start),
    FOREIGN KEY (mirror, topic, partition)
        REFERENCES mirror_partitions (mirror, topic, partition) ON DELETE CASCADE
);

CREATE TABLE instances (
    id                  text PRIMARY KEY CHECK (id <> ''),
    hostname            text NOT NULL DEFAULT '',
    version             text NOT NULL DEFAULT '',
    started_at          timestamptz NOT NULL DEFAULT now(),
    heartbeat_at        timestamptz NOT NULL DEFAULT now(),
    stopped_at          timestamptz
);

-- Transactional outbox for __mirror_state. value NULL is a tombstone.
CREATE TABLE outbox (
    id                  bigserial PRIMARY KEY,
    mirror              text NOT NULL,
    key                 text NOT NULL CHECK (key <> ''),
    value               jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    published_at        timestamptz
);

CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- Audit log of every state change and operator action; streamed by /v1/events.
CREATE TABLE events (
    id                  bigserial PRIMARY KEY,
    at                  timestamptz NOT NULL DEFAULT now(),
    kind                text NOT NULL CHECK (kind <> ''),
    mirror              text,
    topic               text,
    partition           integer,
    message             text NOT NULL,
    data                jsonb
);

CREATE INDEX events_mirror_idx ON events (mirror, id);

-- Wake listeners (workers, the event stream) as soon as a change commits.
CREATE FUNCTION kmirror_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kmirror_events', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION kmirror_notify_event();
