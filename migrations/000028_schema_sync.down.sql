ALTER TABLE mirrors DROP COLUMN schema_sync;
