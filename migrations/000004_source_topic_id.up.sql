-- The source topic's id when mirroring began: a topic deleted and created
-- again under the same name has a new id, which alignment and resume refuse
-- to mirror into the old destination.
ALTER TABLE mirror_topics ADD COLUMN source_topic_id bytea CHECK (octet_length(source_topic_id) = 16);
