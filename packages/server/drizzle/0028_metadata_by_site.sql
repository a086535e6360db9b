-- list and count's metadata filter scoped by site (issue 41, F7): the GIN index on the metadata
-- alone spanned every site, in its entries and in the planner's statistics, so a value that
-- another site's accounts held by the hundred thousand made a count of it slower here. The
-- metadata under the site's name gives each site entries (and statistics) of its own.
-- Built here inside the upgrade's transaction, which blocks writes to users while it builds (on a
-- large table, minutes): an operator may build it beforehand without blocking anything, with
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS users_metadata_site_idx ON users
--     USING gin (jsonb_set('{}'::jsonb, array[site], metadata) jsonb_path_ops);
-- and this step then finds it (docs/deploy.md#upgrades). The old index goes last, so that the
-- exclusive lock its drop takes is held only until the commit that follows.
CREATE INDEX IF NOT EXISTS "users_metadata_site_idx" ON "users" USING gin (jsonb_set('{}'::jsonb, array["site"], "metadata") jsonb_path_ops);--> statement-breakpoint
DROP INDEX IF EXISTS "users_metadata_idx";
