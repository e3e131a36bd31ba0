DROP TRIGGER IF EXISTS mirrors_notify_credentials ON mirrors;
ALTER TABLE mirrors DROP COLUMN IF EXISTS missing_credentials;
