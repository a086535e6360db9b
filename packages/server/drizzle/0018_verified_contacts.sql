-- Verified contacts (issue 28, point 2): when the email and the phone, as they are now, were last
-- said verified (null: not verified). A verified phone is a phone: the check is added NOT VALID and
-- then validated, which reads the table without blocking its writes (every row passes: the
-- columns are new and null).
ALTER TABLE "users" ADD COLUMN "email_verified_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "phone_verified_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_phone_verified_check" CHECK ("users"."phone_verified_at" is null or "users"."phone" is not null) NOT VALID;--> statement-breakpoint
ALTER TABLE "users" VALIDATE CONSTRAINT "users_phone_verified_check";
