-- Issue 59, point 1: a site's sign-in providers, configured by the operator (cli provider set); the
-- client secret kept sealed (kernel/secret-box.ts), never in the clear.
CREATE TABLE "providers" (
	"site" text NOT NULL,
	"name" text NOT NULL,
	"kind" text NOT NULL,
	"issuer" text,
	"endpoints" jsonb,
	"userinfo_map" jsonb,
	"client_id" text NOT NULL,
	"client_secret_sealed" text NOT NULL,
	"scopes" text[] NOT NULL,
	"redirect_uris" text[] NOT NULL,
	"on_new_person" text DEFAULT 'refuse' NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "providers_site_name_pk" PRIMARY KEY("site","name"),
	CONSTRAINT "providers_kind_check" CHECK ("providers"."kind" in ('oidc', 'oauth2')),
	CONSTRAINT "providers_on_new_person_check" CHECK ("providers"."on_new_person" in ('create', 'refuse')),
	CONSTRAINT "providers_kind_fields_check" CHECK (("providers"."kind" = 'oidc' and "providers"."issuer" is not null) or ("providers"."kind" = 'oauth2' and "providers"."endpoints" is not null and "providers"."userinfo_map" is not null))
);
