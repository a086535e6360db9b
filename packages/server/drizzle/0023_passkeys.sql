CREATE TABLE "passkey_challenges" (
	"challenge_hash" text PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"purpose" text NOT NULL,
	"user_id" uuid,
	"expires_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "passkey_challenges_purpose_check" CHECK ("passkey_challenges"."purpose" in ('register', 'login'))
);
--> statement-breakpoint
ALTER TABLE "user_factors" DROP CONSTRAINT "user_factors_type_check";--> statement-breakpoint
ALTER TABLE "user_factors" ALTER COLUMN "secret" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "site_settings" ADD COLUMN "rp_id" text;--> statement-breakpoint
ALTER TABLE "site_settings" ADD COLUMN "rp_name" text;--> statement-breakpoint
ALTER TABLE "site_settings" ADD COLUMN "rp_origins" jsonb;--> statement-breakpoint
ALTER TABLE "user_factors" ADD COLUMN "credential_id" text;--> statement-breakpoint
ALTER TABLE "user_factors" ADD COLUMN "public_key" text;--> statement-breakpoint
ALTER TABLE "user_factors" ADD COLUMN "sign_count" bigint;--> statement-breakpoint
ALTER TABLE "user_factors" ADD COLUMN "transports" jsonb;--> statement-breakpoint
CREATE INDEX "passkey_challenges_site_idx" ON "passkey_challenges" USING btree ("site","expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "user_factors_credential_idx" ON "user_factors" USING btree ("credential_id");--> statement-breakpoint
ALTER TABLE "user_factors" ADD CONSTRAINT "user_factors_shape_check" CHECK (("user_factors"."type" = 'totp' and "user_factors"."secret" is not null) or ("user_factors"."type" = 'passkey' and "user_factors"."credential_id" is not null and "user_factors"."public_key" is not null));--> statement-breakpoint
ALTER TABLE "user_factors" ADD CONSTRAINT "user_factors_type_check" CHECK ("user_factors"."type" in ('totp', 'passkey'));