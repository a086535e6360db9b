-- GET /api/1/audit (issue 31): one account's audit rows, newest first, found through (site, user_id)
-- and read in id order, rather than by walking its whole site's rows through audit_log_site_at_idx.
-- Built in the migration's transaction: writes to audit_log wait while it builds.
CREATE INDEX "audit_log_site_user_idx" ON "audit_log" USING btree ("site","user_id","id");
