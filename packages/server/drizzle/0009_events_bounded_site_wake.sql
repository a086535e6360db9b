ALTER TABLE "webhook_deliveries" ADD COLUMN "first_attempt_at" timestamp (3) with time zone;--> statement-breakpoint
-- Bounded runs: at most 10,000 of a site's events per call, in insertion order, so that a
-- backlog (the sequencer stopped while an import wrote a million events) is numbered in calls
-- that each fit in statement_timeout; events.ts calls again while a call numbered that many.
CREATE OR REPLACE FUNCTION number_site_events(for_site text, last_seq bigint) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  numbered integer;
  upto bigint;
BEGIN
  WITH fresh AS (
    SELECT pos, last_seq + row_number() OVER (ORDER BY pos) AS n
    FROM (SELECT pos FROM events WHERE site = for_site AND seq IS NULL ORDER BY pos LIMIT 10000) unnumbered
  ), done AS (
    UPDATE events e SET seq = fresh.n FROM fresh WHERE e.pos = fresh.pos RETURNING fresh.n
  )
  SELECT count(*), coalesce(max(n), last_seq) INTO numbered, upto FROM done;
  UPDATE event_sequences SET last = upto WHERE site = for_site;
  RETURN numbered;
END $$;
--> statement-breakpoint
-- As in 0008, but the notification names the site whose events were numbered (one per site a
-- run numbered): a long-poll wakes only for its own site. An empty payload (0008's, from a
-- server not yet upgraded) still means "some site".
CREATE OR REPLACE FUNCTION sequence_events(only_site text DEFAULT NULL) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n integer;
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
      n := number_site_events(r.site, r.last);
      IF n > 0 THEN
        PERFORM pg_notify('ua_events', r.site);
      END IF;
      total := total + n;
    END LOOP;
  ELSE
    FOR r IN
      SELECT s.site, s.last FROM event_sequences s
      WHERE s.site = only_site AND EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.seq IS NULL)
      FOR UPDATE
    LOOP
      n := number_site_events(r.site, r.last);
      IF n > 0 THEN
        PERFORM pg_notify('ua_events', r.site);
      END IF;
      total := total + n;
    END LOOP;
  END IF;
  RETURN total;
END $$;
