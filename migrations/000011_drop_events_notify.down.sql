CREATE FUNCTION kmirror_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kmirror_events', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION kmirror_notify_event();
