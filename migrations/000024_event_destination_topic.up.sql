-- An event that names a topic names its destination topic too: with
-- topic.name.prefix the two differ (orders is written to east.orders), and
-- an operator reading the audit log looks for either. Events are written in
-- many places, some built in SQL (the bulk partition transitions), so a
-- trigger fills it from the topic's row, as 000013's fills the incarnation.
-- Events recorded before keep it NULL: until 000023 every destination topic
-- was named as its source, and readers take the topic's name for it.
ALTER TABLE events ADD COLUMN destination_topic text;

CREATE FUNCTION kmirror_event_destination_topic() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.destination_topic := (SELECT dest_topic FROM mirror_topics WHERE mirror = NEW.mirror AND topic = NEW.topic);
    RETURN NEW;
END
$$;

CREATE TRIGGER events_destination_topic BEFORE INSERT ON events
    FOR EACH ROW
    WHEN (NEW.mirror IS NOT NULL AND NEW.topic IS NOT NULL AND NEW.destination_topic IS NULL)
    EXECUTE FUNCTION kmirror_event_destination_topic();
