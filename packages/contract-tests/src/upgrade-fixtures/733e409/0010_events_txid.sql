-- The sequencer finds a site's new events by the transaction that wrote them, as PgQ does, and
-- no longer by the partial index of unnumbered events: that index kept an entry for every event
-- ever numbered until VACUUM, and every run read them all (482 pages after 190,000 updates: 2 ms
-- a run, most of what the outbox cost a write). See events.ts.
DROP INDEX "events_unnumbered_idx";--> statement-breakpoint
ALTER TABLE "event_sequences" ADD COLUMN "snapshot" "pg_snapshot";--> statement-breakpoint
-- The default is set apart from the ADD: a volatile default in the ADD would rewrite every
-- existing event under an exclusive lock. Existing events keep a null txid; a site's first run
-- (snapshot null) numbers them by seq IS NULL.
ALTER TABLE "events" ADD COLUMN "txid" "xid8";--> statement-breakpoint
ALTER TABLE "events" ALTER COLUMN "txid" SET DEFAULT pg_current_xact_id();--> statement-breakpoint
CREATE INDEX "events_site_txid_idx" ON "events" USING btree ("site","txid") WHERE "events"."txid" is not null;--> statement-breakpoint
-- Every site with events has its row: from now on the write that makes a site's first event makes
-- it (events.ts), and the sequencer no longer looks for sites among the events.
INSERT INTO event_sequences (site, last) SELECT DISTINCT site, 0 FROM events WHERE seq IS NULL
ON CONFLICT (site) DO NOTHING;--> statement-breakpoint
DROP FUNCTION number_site_events(text, bigint);--> statement-breakpoint
-- Numbers a site's events that committed since its last run, in insertion order; the caller
-- holds the site's row lock in event_sequences. Since its last run: written by a transaction
-- still in progress in that run's snapshot (pg_snapshot_xip) or begun after it (>= xmax); all
-- others were visible to that run, which numbered them. One statement, so one snapshot: what it
-- numbers and the snapshot it records are the same view. A run that stops at its bound keeps the
-- old snapshot (the next call goes on; `seq IS NULL` skips what this one numbered).
CREATE FUNCTION number_site_events(for_site text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  since pg_snapshot;
  numbered integer;
BEGIN
  SELECT snapshot INTO since FROM event_sequences WHERE site = for_site;
  IF since IS NULL THEN
    -- The site's first run: its events from before migration 0010 have no txid.
    WITH fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k
      FROM (SELECT pos FROM events WHERE site = for_site AND seq IS NULL ORDER BY pos LIMIT 10000) unnumbered
    ), done AS (
      UPDATE events e SET seq = s.last + fresh.k FROM fresh, event_sequences s
      WHERE e.pos = fresh.pos AND s.site = for_site RETURNING e.seq
    ), counted AS (
      SELECT count(*)::int AS n, max(seq) AS upto FROM done
    )
    UPDATE event_sequences s SET last = coalesce(c.upto, s.last),
      snapshot = CASE WHEN c.n < 10000 THEN pg_current_snapshot() ELSE s.snapshot END
    FROM counted c WHERE s.site = for_site RETURNING c.n INTO numbered;
  ELSE
    WITH fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k
      FROM (
        SELECT pos FROM events
        WHERE site = for_site AND seq IS NULL
          AND (txid = ANY (ARRAY(SELECT pg_snapshot_xip(since))) OR txid >= pg_snapshot_xmax(since))
        ORDER BY pos LIMIT 10000
      ) unnumbered
    ), done AS (
      UPDATE events e SET seq = s.last + fresh.k FROM fresh, event_sequences s
      WHERE e.pos = fresh.pos AND s.site = for_site RETURNING e.seq
    ), counted AS (
      SELECT count(*)::int AS n, max(seq) AS upto FROM done
    )
    UPDATE event_sequences s SET last = coalesce(c.upto, s.last),
      snapshot = CASE WHEN c.n < 10000 THEN pg_current_snapshot() ELSE s.snapshot END
    FROM counted c WHERE s.site = for_site RETURNING c.n INTO numbered;
  END IF;
  RETURN numbered;
END $$;
--> statement-breakpoint
-- As in 0009 (one notification per site numbered, naming it), but a site is visited only when
-- its index of transactions holds events its last run could not see (or it never ran).
CREATE OR REPLACE FUNCTION sequence_events(only_site text DEFAULT NULL) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n integer;
  total integer := 0;
BEGIN
  IF only_site IS NULL THEN
    FOR r IN
      SELECT s.site FROM event_sequences s
      WHERE s.snapshot IS NULL OR EXISTS (
        SELECT 1 FROM events e WHERE e.site = s.site AND e.seq IS NULL
          AND (e.txid = ANY (ARRAY(SELECT pg_snapshot_xip(s.snapshot))) OR e.txid >= pg_snapshot_xmax(s.snapshot)))
      FOR UPDATE SKIP LOCKED
    LOOP
      n := number_site_events(r.site);
      IF n > 0 THEN
        PERFORM pg_notify('ua_events', r.site);
      END IF;
      total := total + n;
    END LOOP;
  ELSE
    -- A site written only by servers older than 0010 (during a rolling upgrade) gets its row here.
    INSERT INTO event_sequences (site, last) VALUES (only_site, 0) ON CONFLICT (site) DO NOTHING;
    FOR r IN
      SELECT s.site FROM event_sequences s
      WHERE s.site = only_site AND (s.snapshot IS NULL OR EXISTS (
        SELECT 1 FROM events e WHERE e.site = s.site AND e.seq IS NULL
          AND (e.txid = ANY (ARRAY(SELECT pg_snapshot_xip(s.snapshot))) OR e.txid >= pg_snapshot_xmax(s.snapshot))))
      FOR UPDATE
    LOOP
      n := number_site_events(r.site);
      IF n > 0 THEN
        PERFORM pg_notify('ua_events', r.site);
      END IF;
      total := total + n;
    END LOOP;
  END IF;
  RETURN total;
END $$;
