-- A plain event queue (issue 34, point 3; events/sequencer.ts says how it works): a write queues
-- its events in event_queue, and the sequencer, in TypeScript, moves those that committed into
-- events with their site's next numbers. Gone: the numbering functions of 0008 to 0011, the
-- transaction ids and snapshots they kept in our tables, and event_batches (a number is a column).
--
-- Servers of an older version are stopped first: from here on their writes of events fail (an
-- event has no number), and so does their feed (sequence_events is gone), rather than leave
-- events that nothing numbers. No time limit: a table of a million events takes longer than a
-- request's statement_timeout, and the migration would then fail at every start.
SET LOCAL statement_timeout = 0;--> statement-breakpoint
-- Writes of events wait until this commits; each one under way has committed before this begins.
LOCK TABLE "event_sequences", "events", "event_batches" IN ACCESS EXCLUSIVE MODE;--> statement-breakpoint
ALTER TABLE "events" RENAME TO "events_0014";--> statement-breakpoint
CREATE TABLE "event_queue" (
	"pos" bigint GENERATED ALWAYS AS IDENTITY (sequence name "event_queue_pos_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"site" text NOT NULL,
	"type" text NOT NULL,
	"subject" uuid NOT NULL,
	"time" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"changed" text,
	"data" jsonb NOT NULL,
	"traceparent" text DEFAULT nullif(current_setting('user_accounts.traceparent', true), ''),
	CONSTRAINT "event_queue_site_pos_pk" PRIMARY KEY("site","pos")
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" uuid NOT NULL,
	"site" text NOT NULL,
	"type" text NOT NULL,
	"subject" uuid NOT NULL,
	"time" timestamp (3) with time zone NOT NULL,
	"changed" text,
	"data" jsonb NOT NULL,
	"traceparent" text,
	"seq" bigint NOT NULL,
	CONSTRAINT "events_site_seq_pk" PRIMARY KEY("site","seq")
);
--> statement-breakpoint
-- Today's numbers carried over: a batch of 0011 numbers its events last_seq - cardinality(pos) + 1
-- to last_seq. Those pruned are gone from events_0014, and stay gone.
INSERT INTO "events" ("id", "site", "type", "subject", "time", "changed", "data", "traceparent", "seq")
SELECT e.id, e.site, e.type, e.subject, e.time, e.changed, e.data, e.traceparent, b.last_seq - cardinality(b.pos) + o.ord
FROM "event_batches" b CROSS JOIN LATERAL unnest(b.pos) WITH ORDINALITY AS o(pos, ord)
JOIN "events_0014" e ON e.pos = o.pos;--> statement-breakpoint
-- The events no run had numbered yet (all committed: see the LOCK) take their site's next numbers,
-- in the order they were written, as a run of the sequencer would give them.
WITH fresh AS (
  INSERT INTO "events" ("id", "site", "type", "subject", "time", "changed", "data", "traceparent", "seq")
  SELECT e.id, e.site, e.type, e.subject, e.time, e.changed, e.data, e.traceparent,
    coalesce(s.last, 0) + row_number() OVER (PARTITION BY e.site ORDER BY e.pos)
  FROM "events_0014" e
    LEFT JOIN (SELECT unnest(pos) AS pos FROM "event_batches") numbered ON numbered.pos = e.pos
    LEFT JOIN "event_sequences" s ON s.site = e.site
  WHERE numbered.pos IS NULL
  RETURNING site, seq
)
INSERT INTO "event_sequences" ("site", "last") SELECT site, max(seq) FROM fresh GROUP BY site
ON CONFLICT ("site") DO UPDATE SET "last" = excluded."last";--> statement-breakpoint
DROP FUNCTION "sequence_events"(text);--> statement-breakpoint
DROP FUNCTION "number_site_events"(text);--> statement-breakpoint
DROP FUNCTION "site_events"(text, bigint, bigint);--> statement-breakpoint
DROP TABLE "events_0014";--> statement-breakpoint
DROP TABLE "event_batches";--> statement-breakpoint
ALTER TABLE "event_sequences" DROP COLUMN "snapshot";--> statement-breakpoint
ALTER TABLE "event_sequences" DROP COLUMN "snapshot_last";
