-- Wakes the servers' long-polls and webhook senders when events commit (NOTIFY is delivered at
-- commit, and only then). Once per statement, not per row: an import of 1,000 accounts is one
-- NOTIFY; listeners read what is new themselves, the payload is not used.
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('ua_events', '');
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION events_notify();
