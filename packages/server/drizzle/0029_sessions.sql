-- Sessions and the keys that sign their access tokens (issue 43); sessions/ holds the rules.
CREATE TABLE "sessions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"user_id" uuid NOT NULL,
	"token_hash" text NOT NULL,
	"previous_token_hash" text,
	"rotated_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	"idle_seconds" integer NOT NULL,
	"aal" smallint NOT NULL,
	"amr" jsonb NOT NULL,
	"user_agent" text,
	"ip" text,
	"impersonator" jsonb,
	"revoked_at" timestamp (3) with time zone,
	"revoke_reason" text,
	CONSTRAINT "sessions_aal_check" CHECK ("sessions"."aal" in (1, 2, 3))
);
--> statement-breakpoint
CREATE TABLE "signing_keys" (
	"kid" text PRIMARY KEY NOT NULL,
	"algorithm" text DEFAULT 'ES256' NOT NULL,
	"public_jwk" jsonb NOT NULL,
	"private_sealed" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"activates_at" timestamp (3) with time zone NOT NULL,
	"retired_at" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "site_settings" ADD COLUMN "session_lifetime_seconds" integer;--> statement-breakpoint
ALTER TABLE "site_settings" ADD COLUMN "session_idle_seconds" integer;--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_token_idx" ON "sessions" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "sessions_previous_token_idx" ON "sessions" USING btree ("previous_token_hash");--> statement-breakpoint
CREATE INDEX "sessions_user_idx" ON "sessions" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE INDEX "sessions_site_expiry_idx" ON "sessions" USING btree ("site","expires_at");