-- Issue 59, points 2-4: the sign-in flows the service runs for a site's providers.
-- provider_states: a start's state (by its SHA-256 only), its PKCE verifier and nonce sealed,
-- single use (the callback deletes the row), ten minutes. link_tickets: identity_unlinked's
-- ticket (by its SHA-256), the identity and profile the provider vouched for. provider_tokens:
-- the provider's tokens, sealed, only for a provider set with --keep-tokens. audit_log.provider:
-- the provider's name on a callback's row. providers.keep_tokens: --keep-tokens.
CREATE TABLE "link_tickets" (
	"ticket_hash" text PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"provider" text NOT NULL,
	"subject" text NOT NULL,
	"email" text,
	"email_verified" boolean DEFAULT false NOT NULL,
	"name" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "provider_states" (
	"state_hash" text PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"provider" text NOT NULL,
	"redirect_uri" text NOT NULL,
	"sealed" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "provider_tokens" (
	"site" text NOT NULL,
	"provider" text NOT NULL,
	"subject" text NOT NULL,
	"user_id" uuid NOT NULL,
	"sealed" text NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_tokens_site_provider_subject_pk" PRIMARY KEY("site","provider","subject")
);
--> statement-breakpoint
ALTER TABLE "audit_log" ADD COLUMN "provider" text;--> statement-breakpoint
ALTER TABLE "providers" ADD COLUMN "keep_tokens" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "provider_tokens" ADD CONSTRAINT "provider_tokens_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "link_tickets_expires_idx" ON "link_tickets" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "provider_states_expires_idx" ON "provider_states" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "provider_tokens_user_idx" ON "provider_tokens" USING btree ("user_id");