ALTER TABLE mirror_topics DROP COLUMN read_only_enforced;
