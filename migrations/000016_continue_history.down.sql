ALTER TABLE mirror_topics DROP COLUMN continue_history;
