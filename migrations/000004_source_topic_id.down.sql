ALTER TABLE mirror_topics DROP COLUMN source_topic_id;
