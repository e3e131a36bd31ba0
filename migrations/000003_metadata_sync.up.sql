-- Metadata sync (DESIGN.md section 5).

-- "Sync now": the API records a request; the instance holding the mirror's
-- metadata lease runs a pass and, with the pass result, records the latest
-- request the pass served. Both are the database's clock, so instances
-- never compare their own clocks.
ALTER TABLE mirrors
    ADD COLUMN sync_requested_at timestamptz,
    ADD COLUMN sync_served_at    timestamptz;

-- Consecutive sync passes that found a mirrored topic missing on the source;
-- two in a row stop the topic. Kept here so a lease move does not reset it.
ALTER TABLE mirror_topics
    ADD COLUMN source_missing_passes integer NOT NULL DEFAULT 0 CHECK (source_missing_passes >= 0);

-- ACLs the metadata sync created on the destination, so it removes only its
-- own copies once the source drops them, and never a local ACL. Values are
-- Kafka's names (TOPIC, LITERAL, READ, ALLOW).
CREATE TABLE synced_acls (
    mirror              text NOT NULL REFERENCES mirrors (name) ON DELETE CASCADE,
    resource_type       text NOT NULL CHECK (resource_type <> ''),
    resource_name       text NOT NULL,
    pattern_type        text NOT NULL CHECK (pattern_type <> ''),
    principal           text NOT NULL,
    host                text NOT NULL,
    operation           text NOT NULL CHECK (operation <> ''),
    permission          text NOT NULL CHECK (permission IN ('ALLOW', 'DENY')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mirror, resource_type, resource_name, pattern_type, principal, host, operation, permission)
);
