DROP TABLE IF EXISTS synced_acls;
ALTER TABLE mirror_topics DROP COLUMN IF EXISTS source_missing_passes;
ALTER TABLE mirrors DROP COLUMN IF EXISTS sync_served_at, DROP COLUMN IF EXISTS sync_requested_at;
