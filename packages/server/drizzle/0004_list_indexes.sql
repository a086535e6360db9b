CREATE TABLE "service_keys" (
	"name" text PRIMARY KEY NOT NULL,
	"key" text NOT NULL
);
--> statement-breakpoint
CREATE INDEX "users_list_created_idx" ON "users" USING btree ("site","created_at","id") WHERE "users"."origin" = 'api';--> statement-breakpoint
CREATE INDEX "users_list_email_prefix_idx" ON "users" USING btree ("site",lower("email") text_pattern_ops) WHERE "users"."origin" = 'api';--> statement-breakpoint
CREATE INDEX "users_list_email_domain_idx" ON "users" USING btree ("site",regexp_replace(lower("email"), '^.*@', '')) WHERE "users"."origin" = 'api';