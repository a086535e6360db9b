ALTER TABLE "users" ADD COLUMN "disabled_until" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "disabled_reason" text;--> statement-breakpoint
CREATE INDEX "users_disabled_until_idx" ON "users" USING btree ("disabled_until") WHERE "users"."disabled_until" is not null;