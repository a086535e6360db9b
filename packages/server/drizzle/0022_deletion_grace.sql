CREATE TABLE "site_settings" (
	"site" text PRIMARY KEY NOT NULL,
	"deletion_grace_days" smallint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "deleted_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "purge_at" timestamp (3) with time zone;--> statement-breakpoint
CREATE INDEX "users_purge_at_idx" ON "users" USING btree ("purge_at") WHERE "users"."purge_at" is not null;--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_grace_check" CHECK (("users"."deleted_at" is null) = ("users"."purge_at" is null));