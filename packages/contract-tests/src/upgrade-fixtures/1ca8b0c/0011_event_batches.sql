-- Sequence numbers move out of the events into event_batches, a row per numbering run (or per 200
-- of its events): the events are written once and never updated. Numbering each event with an
-- UPDATE rewrote the whole row (its JSON data with it) and its three index entries: 12% of an
-- update's throughput, of the outbox's 14% in all (see events.ts).
--
-- Servers of the version before, during a rolling upgrade, keep writing events and numbering them
-- (through sequence_events, replaced below), but their feed, webhook sender and pruning read
-- events.seq, which is gone: those fail with an error until the server is replaced, rather than
-- skip or prune events of the new numbering.
--
-- First, with writes of events held off until this migration commits, everything written so far
-- is numbered (0010's functions), then moved into batches. No time limit, as in 0010.
SET LOCAL statement_timeout = 0;--> statement-breakpoint
LOCK TABLE "event_sequences", "events" IN ACCESS EXCLUSIVE MODE;--> statement-breakpoint
DO $$ BEGIN
  WHILE sequence_events() > 0 LOOP END LOOP;
  IF EXISTS (SELECT 1 FROM events WHERE seq IS NULL) THEN
    RAISE EXCEPTION 'events left unnumbered before migration 0011; nothing was changed, start again';
  END IF;
END $$;--> statement-breakpoint
CREATE TABLE "event_batches" (
	"site" text NOT NULL,
	"last_seq" bigint NOT NULL,
	"pos" bigint[] NOT NULL,
	CONSTRAINT "event_batches_pkey" PRIMARY KEY("site","last_seq")
);
--> statement-breakpoint
-- A site's numbers are dense above its pruned_through, so each group of 200 is a run of numbers.
INSERT INTO event_batches (site, last_seq, pos)
SELECT site, max(seq), array_agg(pos ORDER BY seq) FROM events GROUP BY site, (seq - 1) / 200;--> statement-breakpoint
DROP INDEX "events_site_seq_key";--> statement-breakpoint
ALTER TABLE "event_sequences" ADD COLUMN "snapshot_last" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE event_sequences SET snapshot_last = last;--> statement-breakpoint
ALTER TABLE "events" DROP COLUMN "seq";--> statement-breakpoint
-- A site's numbered events after `after_seq`, in order, at most `lim` (null: all), as
-- (seq, pos): join events on pos. Plain SQL, so that the planner inlines it where it is used.
CREATE FUNCTION site_events(for_site text, after_seq bigint, lim bigint) RETURNS TABLE (seq bigint, pos bigint)
LANGUAGE sql STABLE AS $$
  SELECT b.last_seq - cardinality(b.pos) + o.ord AS seq, o.pos
  FROM event_batches b CROSS JOIN LATERAL unnest(b.pos) WITH ORDINALITY AS o(pos, ord)
  WHERE b.site = for_site AND b.last_seq > after_seq AND b.last_seq - cardinality(b.pos) + o.ord > after_seq
  ORDER BY b.last_seq, o.ord
  LIMIT lim
$$;--> statement-breakpoint
-- Numbers a site's events that committed since its last run, in insertion order, into
-- event_batches; the caller holds the site's row lock in event_sequences. As in 0010, the events
-- since the last run are those its snapshot could not see (pg_snapshot_xip, or from xmax on):
-- every one of them is new, unless the last call stopped at its bound (10,000) and kept its
-- snapshot (`snapshot_last` < `last`): then those numbered since are left out.
-- Without a usable snapshot (a site whose first events a server older than 0010 wrote, or a
-- database restored from a logical dump, whose transaction ids came from another cluster): every
-- event of the site that no batch holds, and, once none is left, their transaction ids are
-- cleared (10,000 a call), so that ids of the other cluster are never taken for new ones here.
-- One statement per call, so one snapshot: what it numbers, clears and records is the same view.
-- plan_cache_mode = force_custom_plan: each call is planned for the table as it is then. A plan
-- kept from the first calls, made while the table was nearly empty, read all of a site's events
-- by the index on site alone (no ANALYZE had run: the embedded database never runs one, nor does a
-- PostgreSQL without autovacuum), so each run took longer as events accumulated: 2 ms after 10
-- seconds of writes, 10 ms after 50, and the outbox's cost to writes grew with it.
CREATE OR REPLACE FUNCTION number_site_events(for_site text) RETURNS integer LANGUAGE plpgsql
  SET jit = off SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  since pg_snapshot;
  since_last bigint;
  last_now bigint;
  numbered integer;
BEGIN
  SELECT snapshot, snapshot_last, last INTO since, since_last, last_now FROM event_sequences WHERE site = for_site;
  IF pg_snapshot_xmax(since) > pg_snapshot_xmax(pg_current_snapshot()) THEN
    since := NULL;
  END IF;
  IF since IS NULL THEN
    WITH known AS (
      SELECT p.pos FROM event_batches b CROSS JOIN LATERAL unnest(b.pos) AS p(pos) WHERE b.site = for_site
    ), fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k FROM (
        SELECT e.pos FROM events e LEFT JOIN known ON known.pos = e.pos
        WHERE e.site = for_site AND known.pos IS NULL ORDER BY e.pos LIMIT 10000
      ) unnumbered
    ), made AS (
      INSERT INTO event_batches (site, last_seq, pos)
      SELECT for_site, last_now + max(k), array_agg(pos ORDER BY k) FROM fresh GROUP BY (k - 1) / 200
      RETURNING cardinality(pos) AS n, last_seq
    ), cleared AS (
      UPDATE events SET txid = NULL
      WHERE pos IN (SELECT pos FROM events WHERE site = for_site AND txid IS NOT NULL LIMIT 10000)
        AND (SELECT count(*) FROM fresh) < 10000
      RETURNING 1
    ), counted AS (
      SELECT coalesce(sum(n), 0)::int AS n, max(last_seq) AS upto, (SELECT count(*) FROM cleared) AS cleared FROM made
    )
    UPDATE event_sequences s SET last = coalesce(c.upto, s.last),
      snapshot = CASE WHEN c.n < 10000 AND c.cleared < 10000 THEN pg_current_snapshot() END,
      snapshot_last = coalesce(c.upto, s.last)
    FROM counted c WHERE s.site = for_site RETURNING c.n INTO numbered;
  ELSIF since_last < last_now THEN
    WITH known AS (
      SELECT p.pos FROM event_batches b CROSS JOIN LATERAL unnest(b.pos) AS p(pos)
      WHERE b.site = for_site AND b.last_seq > since_last
    ), fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k FROM (
        SELECT written.pos FROM (
          SELECT pos FROM events
          WHERE site = for_site AND (txid = ANY (ARRAY(SELECT pg_snapshot_xip(since))) OR txid >= pg_snapshot_xmax(since))
          OFFSET 0
        ) written LEFT JOIN known ON known.pos = written.pos
        WHERE known.pos IS NULL ORDER BY written.pos LIMIT 10000
      ) unnumbered
    ), made AS (
      INSERT INTO event_batches (site, last_seq, pos)
      SELECT for_site, last_now + max(k), array_agg(pos ORDER BY k) FROM fresh GROUP BY (k - 1) / 200
      RETURNING cardinality(pos) AS n, last_seq
    ), counted AS (
      SELECT coalesce(sum(n), 0)::int AS n, max(last_seq) AS upto FROM made
    )
    UPDATE event_sequences s SET last = coalesce(c.upto, s.last),
      snapshot = CASE WHEN c.n < 10000 THEN pg_current_snapshot() ELSE s.snapshot END,
      snapshot_last = CASE WHEN c.n < 10000 THEN coalesce(c.upto, s.last) ELSE s.snapshot_last END
    FROM counted c WHERE s.site = for_site RETURNING c.n INTO numbered;
  ELSE
    WITH fresh AS (
      SELECT pos, row_number() OVER (ORDER BY pos) AS k FROM (
        -- OFFSET 0: found by (site, txid), then sorted, not looked for along the whole table in pos order.
        SELECT written.pos FROM (
          SELECT pos FROM events
          WHERE site = for_site AND (txid = ANY (ARRAY(SELECT pg_snapshot_xip(since))) OR txid >= pg_snapshot_xmax(since))
          OFFSET 0
        ) written ORDER BY written.pos LIMIT 10000
      ) unnumbered
    ), made AS (
      INSERT INTO event_batches (site, last_seq, pos)
      SELECT for_site, last_now + max(k), array_agg(pos ORDER BY k) FROM fresh GROUP BY (k - 1) / 200
      RETURNING cardinality(pos) AS n, last_seq
    ), counted AS (
      SELECT coalesce(sum(n), 0)::int AS n, max(last_seq) AS upto FROM made
    )
    UPDATE event_sequences s SET last = coalesce(c.upto, s.last),
      snapshot = CASE WHEN c.n < 10000 THEN pg_current_snapshot() ELSE s.snapshot END,
      snapshot_last = CASE WHEN c.n < 10000 THEN coalesce(c.upto, s.last) ELSE s.snapshot_last END
    FROM counted c WHERE s.site = for_site RETURNING c.n INTO numbered;
  END IF;
  RETURN numbered;
END $$;
--> statement-breakpoint
-- As in 0010, without `seq IS NULL`: what a site's last run could not see is new (see above).
-- Two EXISTS, each a range of (site, txid): with the two conditions ORed in one, PostgreSQL read
-- every event of the site kept (the index by site, each entry filtered, 36,000 of them after 36
-- seconds of writes): each run's cost grew with the retention, 14 ms a run there.
CREATE OR REPLACE FUNCTION sequence_events(only_site text DEFAULT NULL) RETURNS integer LANGUAGE plpgsql
  SET jit = off SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  r record;
  n integer;
  total integer := 0;
BEGIN
  IF only_site IS NULL THEN
    FOR r IN
      SELECT s.site FROM event_sequences s
      WHERE (s.snapshot IS NULL OR pg_snapshot_xmax(s.snapshot) > pg_snapshot_xmax(pg_current_snapshot()) 
        OR EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.txid >= pg_snapshot_xmax(s.snapshot))
        OR EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.txid = ANY (ARRAY(SELECT pg_snapshot_xip(s.snapshot)))))
      FOR UPDATE SKIP LOCKED
    LOOP
      n := number_site_events(r.site);
      IF n > 0 THEN
        PERFORM pg_notify('ua_events', r.site);
      END IF;
      total := total + n;
    END LOOP;
  ELSE
    INSERT INTO event_sequences (site, last) VALUES (only_site, 0) ON CONFLICT (site) DO NOTHING;
    FOR r IN
      SELECT s.site FROM event_sequences s
      WHERE s.site = only_site AND (s.snapshot IS NULL OR pg_snapshot_xmax(s.snapshot) > pg_snapshot_xmax(pg_current_snapshot()) 
        OR EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.txid >= pg_snapshot_xmax(s.snapshot))
        OR EXISTS (SELECT 1 FROM events e WHERE e.site = s.site AND e.txid = ANY (ARRAY(SELECT pg_snapshot_xip(s.snapshot)))))
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
