-- list and count's metadata filter scoped by site (issue 41, F7): the GIN index on the metadata
-- alone spanned every site, in its entries and in the planner's statistics, so a value that
-- another site's accounts held by the hundred thousand made a count of it slower here. The
-- metadata under the site's name gives each site entries (and statistics) of its own.
DROP INDEX "users_metadata_idx";--> statement-breakpoint
CREATE INDEX "users_metadata_site_idx" ON "users" USING gin (jsonb_set('{}'::jsonb, array["site"], "metadata") jsonb_path_ops);