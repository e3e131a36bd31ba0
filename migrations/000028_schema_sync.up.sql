-- The last Schema Registry sync of a mirror (docs/design.md, "Schema
-- Registry"), stored by the holder of the mirror's metadata-sync lease as
-- last_sync is: what describe and status show, and what the next pass
-- compares with to record events only when something changed.
ALTER TABLE mirrors ADD COLUMN schema_sync jsonb;
