-- Numbers a site's events that committed and have no number yet, in insertion order, after
-- `last`; the caller holds the site's row lock in event_sequences. Returns how many.
CREATE FUNCTION number_site_events(for_site text, last_seq bigint) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  numbered integer;
  upto bigint;
BEGIN
  WITH fresh AS (
    SELECT pos, last_seq + row_number() OVER (ORDER BY pos) AS n
    FROM events WHERE site = for_site AND seq IS NULL
  ), done AS (
    UPDATE events e SET seq = fresh.n FROM fresh WHERE e.pos = fresh.pos RETURNING fresh.n
  )
  SELECT count(*), coalesce(max(n), last_seq) INTO numbered, upto FROM done;
  UPDATE event_sequences SET last = upto WHERE site = for_site;
  RETURN numbered;
END $$;
--> statement-breakpoint
-- Numbers the events that committed and have no number yet, site by site (see events.ts), then
-- tells every server (NOTIFY, once per run, never on a write's path). Without a site: every
-- site, skipping those another run holds (that run numbers them). With one: that site only,
-- waiting for its lock (a reader that must see the writes that committed before it).
CREATE FUNCTION sequence_events(only_site text DEFAULT NULL) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  r record;
  total integer := 0;
BEGIN
  INSERT INTO event_sequences (site, last)
  SELECT DISTINCT site, 0 FROM events WHERE seq IS NULL AND (only_site IS NULL OR site = only_site)
  ON CONFLICT (site) DO NOTHING;
  IF only_site IS NULL THEN
    FOR r IN
      SELECT s.site, s.last FROM event_sequences s
      WHERE EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.seq IS NULL)
      FOR UPDATE SKIP LOCKED
    LOOP
      total := total + number_site_events(r.site, r.last);
    END LOOP;
  ELSE
    FOR r IN
      SELECT s.site, s.last FROM event_sequences s
      WHERE s.site = only_site AND EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.seq IS NULL)
      FOR UPDATE
    LOOP
      total := total + number_site_events(r.site, r.last);
    END LOOP;
  END IF;
  IF total > 0 THEN
    PERFORM pg_notify('ua_events', '');
  END IF;
  RETURN total;
END $$;
