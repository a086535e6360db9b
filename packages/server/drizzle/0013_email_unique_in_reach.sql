-- Rows out of reach are out of sight (issue 26, finding 9): an email is unique per site among the
-- API's accounts, and among the other rows between themselves, no longer across both. A row that
-- another writer put in the table (the site's own sign-up, a manual insert) showed through
-- create's and import's 409 email_taken; now the API's account is created beside it. The new
-- index is built before the old one goes, so that no moment is without one.
CREATE UNIQUE INDEX "users_site_email_origin_key" ON "users" USING btree ("site",lower("email"),"origin");--> statement-breakpoint
DROP INDEX "users_site_email_lower_key";
