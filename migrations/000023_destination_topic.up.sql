-- A mirror may name its destination topics <topic.name.prefix><source name>
-- (fan-in: two regions' orders side by side as east.orders and
-- west.orders). Each topic row keeps the destination name it was created
-- with, so a row's identity stays its source name and the data plane reads
-- the destination name without the mirror's config.
ALTER TABLE mirror_topics ADD COLUMN dest_topic text;
UPDATE mirror_topics SET dest_topic = topic;
ALTER TABLE mirror_topics ALTER COLUMN dest_topic SET NOT NULL,
    ADD CONSTRAINT mirror_topics_dest_topic_check CHECK (dest_topic ~ '^[a-zA-Z0-9._-]{1,249}$');

-- A row inserted without one is named as its source (no prefix).
CREATE FUNCTION mirror_topics_dest_default() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.dest_topic := coalesce(NEW.dest_topic, NEW.topic);
    RETURN NEW;
END $$;
CREATE TRIGGER mirror_topics_dest_default BEFORE INSERT ON mirror_topics
    FOR EACH ROW EXECUTE FUNCTION mirror_topics_dest_default();

-- One destination topic is written by one mirror at a time (it was one
-- source name, when the names were the same).
DROP INDEX mirror_topics_one_active_mirror;
CREATE UNIQUE INDEX mirror_topics_one_writer ON mirror_topics (dest_topic)
    WHERE desired_state <> 'stopped';
