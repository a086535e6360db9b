-- GET /api/1/events?subject= (issue 31): one account's events in sequence order, found through
-- (site, subject) and read in seq order, rather than by walking every event of its site.
-- Built in the migration's transaction: the sequencer's inserts into events wait while it builds.
CREATE INDEX "events_site_subject_idx" ON "events" USING btree ("site","subject","seq");
