CREATE TABLE "verify_failures" (
	"key" text PRIMARY KEY NOT NULL,
	"failures" integer NOT NULL,
	"window_start" timestamp (3) with time zone NOT NULL,
	"locked_until" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "api_tokens" DROP CONSTRAINT "api_tokens_scopes_check";--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "disabled" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "verify_failures_window_start_idx" ON "verify_failures" USING btree ("window_start");--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_scopes_check" CHECK ("api_tokens"."scopes" <@ array['read', 'write', 'verify']::text[]);--> statement-breakpoint
-- A rehash on verify replaces the stored hash without changing the account as its users see it:
-- such a transaction sets user_accounts.rehash, and the version (the ETag) stays.
CREATE OR REPLACE FUNCTION "users_bump_version"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('user_accounts.rehash', true) = 'on' THEN
    NEW.version := OLD.version;
  ELSE
    NEW.version := OLD.version + 1;
  END IF;
  RETURN NEW;
END
$$;
