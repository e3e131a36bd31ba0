DROP TRIGGER IF EXISTS mirror_topics_dest_default ON mirror_topics;
DROP FUNCTION IF EXISTS mirror_topics_dest_default();
DROP INDEX IF EXISTS mirror_topics_one_writer;
CREATE UNIQUE INDEX mirror_topics_one_active_mirror ON mirror_topics (topic)
    WHERE desired_state <> 'stopped';
ALTER TABLE mirror_topics DROP COLUMN dest_topic;
