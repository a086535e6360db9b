-- Issue 61: enterprise single sign-on per organization. An organization's domains (verified by a TXT
-- record, one organization of a site per verified domain), its SAML and OIDC connections (secrets
-- sealed), the sign-ins started (RelayState hashed, single use), the assertion IDs taken (once
-- across every replica), and the connection a session came through.
CREATE TABLE "org_domains" (
	"org_id" uuid NOT NULL,
	"site" text NOT NULL,
	"domain" text NOT NULL,
	"token" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"verified_at" timestamp (3) with time zone,
	CONSTRAINT "org_domains_org_id_domain_pk" PRIMARY KEY("org_id","domain")
);
--> statement-breakpoint
CREATE TABLE "sso_assertions" (
	"connection_id" uuid NOT NULL,
	"assertion_id" text NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "sso_assertions_connection_id_assertion_id_pk" PRIMARY KEY("connection_id","assertion_id")
);
--> statement-breakpoint
CREATE TABLE "sso_connections" (
	"id" uuid PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"org_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"enforce" boolean DEFAULT false NOT NULL,
	"allow_idp_initiated" boolean DEFAULT false NOT NULL,
	"redirect_uris" text[] NOT NULL,
	"default_roles" text[] NOT NULL,
	"saml_metadata_url" text,
	"saml_idp_entity_id" text,
	"saml_sso_url" text,
	"saml_wants_signed_requests" boolean DEFAULT false NOT NULL,
	"saml_idp_certs" text[],
	"saml_metadata_refreshed_at" timestamp (3) with time zone,
	"sp_cert" text,
	"sp_key_sealed" text,
	"oidc_issuer" text,
	"oidc_client_id" text,
	"oidc_client_secret_sealed" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sso_connections_kind_check" CHECK ("sso_connections"."kind" in ('saml', 'oidc'))
);
--> statement-breakpoint
CREATE TABLE "sso_requests" (
	"state_hash" text PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"connection_id" uuid NOT NULL,
	"request_id" text NOT NULL,
	"redirect_uri" text NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "connection_id" uuid;--> statement-breakpoint
ALTER TABLE "org_domains" ADD CONSTRAINT "org_domains_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."orgs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_assertions" ADD CONSTRAINT "sso_assertions_connection_id_sso_connections_id_fk" FOREIGN KEY ("connection_id") REFERENCES "public"."sso_connections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_connections" ADD CONSTRAINT "sso_connections_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."orgs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sso_requests" ADD CONSTRAINT "sso_requests_connection_id_sso_connections_id_fk" FOREIGN KEY ("connection_id") REFERENCES "public"."sso_connections"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "org_domains_site_verified_key" ON "org_domains" USING btree ("site","domain") WHERE "org_domains"."verified_at" is not null;--> statement-breakpoint
CREATE INDEX "sso_assertions_expires_idx" ON "sso_assertions" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "sso_connections_org_idx" ON "sso_connections" USING btree ("org_id","created_at");--> statement-breakpoint
CREATE INDEX "sso_connections_site_idx" ON "sso_connections" USING btree ("site");--> statement-breakpoint
CREATE INDEX "sso_requests_expires_idx" ON "sso_requests" USING btree ("expires_at");