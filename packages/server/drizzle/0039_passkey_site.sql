-- Issue 57, G8: a passkey's credential id is unique per site, not per deployment. Each passkey
-- takes its account's site; the new index is made before the old one goes.
ALTER TABLE "user_factors" ADD COLUMN "site" text;--> statement-breakpoint
UPDATE "user_factors" f SET "site" = u."site" FROM "users" u WHERE u."id" = f."user_id" AND f."type" = 'passkey';--> statement-breakpoint
CREATE UNIQUE INDEX "user_factors_site_credential_idx" ON "user_factors" USING btree ("site","credential_id");--> statement-breakpoint
DROP INDEX "user_factors_credential_idx";--> statement-breakpoint
ALTER TABLE "user_factors" ADD CONSTRAINT "user_factors_passkey_site_check" CHECK ("user_factors"."type" <> 'passkey' or "user_factors"."site" is not null);
