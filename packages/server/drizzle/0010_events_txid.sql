-- The sequencer finds a site's new events by the transaction that wrote them, as PgQ's ticker
-- does, and no longer by the partial index of unnumbered events: that index kept an entry for
-- every event ever numbered until VACUUM, and every run read them all (482 pages after 190,000
-- updates: 2 ms a run, most of what the outbox cost a write). See events.ts.
--
-- First, with writes of events held off until this migration commits, everything written so far
-- is numbered (0009's functions), so that every site can start from the snapshot taken below.
-- No time limit: a backlog of a million events takes longer than a request's (the server's
-- statement_timeout), and the migration would then fail at every start.
SET LOCAL statement_timeout = 0;--> statement-breakpoint
-- Both tables, exclusively: a sequencer of the older version could otherwise hold a site's row,
-- be skipped by the loop below (SKIP LOCKED), and be aborted by the DDL after it, leaving that
-- site's events unnumbered for good.
LOCK TABLE "event_sequences", "events" IN ACCESS EXCLUSIVE MODE;--> statement-breakpoint
DO $$ BEGIN
  WHILE sequence_events() > 0 LOOP END LOOP;
  IF EXISTS (SELECT 1 FROM events WHERE seq IS NULL) THEN
    RAISE EXCEPTION 'events left unnumbered before migration 0010; nothing was changed, start again';
  END IF;
END $$;--> statement-breakpoint
-- An index entry less per write: the BRIN on time (pruning goes by sequence number since 0009),
-- and the entry of every unnumbered event in (site, seq).
DROP INDEX "events_time_idx";--> statement-breakpoint
DROP INDEX "events_unnumbered_idx";--> statement-breakpoint
DROP INDEX "events_site_seq_key";--> statement-breakpoint
ALTER TABLE "event_sequences" ADD COLUMN "snapshot" "pg_snapshot";--> statement-breakpoint
-- The default is set apart from the ADD: a volatile default in the ADD would rewrite every
-- existing event. Events from before keep a null txid: all of them are numbered by now.
ALTER TABLE "events" ADD COLUMN "txid" "xid8";--> statement-breakpoint
ALTER TABLE "events" ALTER COLUMN "txid" SET DEFAULT pg_current_xact_id();--> statement-breakpoint
CREATE INDEX "events_site_txid_idx" ON "events" USING btree ("site","txid") WHERE "events"."txid" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "events_site_seq_key" ON "events" USING btree ("site","seq") WHERE "events"."seq" is not null;--> statement-breakpoint
UPDATE event_sequences SET snapshot = pg_current_snapshot();--> statement-breakpoint
DROP FUNCTION number_site_events(text, bigint);--> statement-breakpoint
-- Numbers a site's events that committed since its last run, in insertion order; the caller
-- holds the site's row lock in event_sequences. Since its last run: written by a transaction
-- still in progress in that run's snapshot (pg_snapshot_xip) or begun after it (>= xmax); all
-- others were visible to that run, which numbered them. One statement, so one snapshot: what it
-- numbers and the snapshot it records are the same view. A run that stops at its bound keeps the
-- old snapshot (the next call goes on; `seq IS NULL` skips what this one numbered). A site without
-- a snapshot (its first run, see events.ts) looks at all its events.
-- OFFSET 0 keeps `seq IS NULL` a filter: the planner would otherwise guess it rare and look it up
-- by (site, seq), reading the dead entries of every event numbered since the last VACUUM.
-- jit = off: the planner cannot know a snapshot's xmax, guesses a third of the events, and past
-- jit_above_cost compiled the lookup on every run (16 ms to compile, 230 ms to run, 2 buffers read).
CREATE FUNCTION number_site_events(for_site text) RETURNS integer LANGUAGE plpgsql SET jit = off AS $$
DECLARE
  since pg_snapshot;
  numbered integer;
BEGIN
  SELECT snapshot INTO since FROM event_sequences WHERE site = for_site;
  -- A snapshot from another cluster (the database was restored from a logical dump): its ids say
  -- nothing here, so the run looks at all the site's events.
  IF pg_snapshot_xmax(since) > pg_snapshot_xmax(pg_current_snapshot()) THEN
    since := NULL;
  END IF;
  -- Two statements, not one with `since IS NULL OR`: PostgreSQL would plan that one anew each time.
  IF since IS NULL THEN
    WITH fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k
      FROM (
        SELECT pos FROM (SELECT pos, seq FROM events WHERE site = for_site AND txid IS NOT NULL OFFSET 0) written
        WHERE seq IS NULL ORDER BY pos LIMIT 10000
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
  ELSE
    WITH fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k
      FROM (
        SELECT pos FROM (
          SELECT pos, seq FROM events
          WHERE site = for_site AND (txid = ANY (ARRAY(SELECT pg_snapshot_xip(since))) OR txid >= pg_snapshot_xmax(since))
          OFFSET 0
        ) written WHERE seq IS NULL ORDER BY pos LIMIT 10000
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
-- it has events its last run could not see, found by transaction id (as in number_site_events).
CREATE OR REPLACE FUNCTION sequence_events(only_site text DEFAULT NULL) RETURNS integer LANGUAGE plpgsql SET jit = off AS $$
DECLARE
  r record;
  n integer;
  total integer := 0;
BEGIN
  IF only_site IS NULL THEN
    FOR r IN
      SELECT s.site FROM event_sequences s
      WHERE (s.snapshot IS NULL OR pg_snapshot_xmax(s.snapshot) > pg_snapshot_xmax(pg_current_snapshot()) OR EXISTS (
        SELECT 1 FROM (
          SELECT e.seq FROM events e WHERE e.site = s.site
            AND (e.txid = ANY (ARRAY(SELECT pg_snapshot_xip(s.snapshot))) OR e.txid >= pg_snapshot_xmax(s.snapshot))
          OFFSET 0
        ) written WHERE written.seq IS NULL))
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
      WHERE s.site = only_site AND (s.snapshot IS NULL OR pg_snapshot_xmax(s.snapshot) > pg_snapshot_xmax(pg_current_snapshot()) OR EXISTS (
        SELECT 1 FROM (
          SELECT e.seq FROM events e WHERE e.site = s.site
            AND (e.txid = ANY (ARRAY(SELECT pg_snapshot_xip(s.snapshot))) OR e.txid >= pg_snapshot_xmax(s.snapshot))
          OFFSET 0
        ) written WHERE written.seq IS NULL))
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
