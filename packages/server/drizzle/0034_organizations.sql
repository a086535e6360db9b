CREATE TABLE "org_invitations" (
	"id" uuid PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"org_id" uuid NOT NULL,
	"email" text NOT NULL,
	"roles" text[] NOT NULL,
	"ticket_hash" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "org_memberships" (
	"org_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"site" text NOT NULL,
	"roles" text[] NOT NULL,
	"joined_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "org_memberships_org_id_user_id_pk" PRIMARY KEY("org_id","user_id")
);
--> statement-breakpoint
CREATE TABLE "org_roles" (
	"site" text NOT NULL,
	"role" text NOT NULL,
	"permissions" text[] NOT NULL,
	"position" smallint NOT NULL,
	CONSTRAINT "org_roles_site_role_pk" PRIMARY KEY("site","role")
);
--> statement-breakpoint
CREATE TABLE "orgs" (
	"id" uuid PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"name" text NOT NULL,
	"slug" text,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"member_count" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "org_invitations" ADD CONSTRAINT "org_invitations_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."orgs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "org_memberships" ADD CONSTRAINT "org_memberships_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."orgs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "org_memberships" ADD CONSTRAINT "org_memberships_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "org_invitations_ticket_idx" ON "org_invitations" USING btree ("ticket_hash");--> statement-breakpoint
CREATE INDEX "org_invitations_org_idx" ON "org_invitations" USING btree ("org_id","created_at");--> statement-breakpoint
CREATE INDEX "org_invitations_site_idx" ON "org_invitations" USING btree ("site");--> statement-breakpoint
CREATE INDEX "org_memberships_user_idx" ON "org_memberships" USING btree ("user_id","joined_at");--> statement-breakpoint
CREATE INDEX "org_memberships_site_idx" ON "org_memberships" USING btree ("site");--> statement-breakpoint
CREATE UNIQUE INDEX "orgs_site_slug_idx" ON "orgs" USING btree ("site","slug" text_pattern_ops);--> statement-breakpoint
CREATE INDEX "orgs_site_created_idx" ON "orgs" USING btree ("site","created_at","id");--> statement-breakpoint
CREATE INDEX "orgs_site_name_idx" ON "orgs" USING btree ("site",lower("name") text_pattern_ops);