CREATE TABLE "tickets" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"site" text NOT NULL,
	"user_id" uuid NOT NULL,
	"purpose" text NOT NULL,
	"secret_hash" text NOT NULL,
	"new_email" text,
	"tries" smallint DEFAULT 0 NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tickets_purpose_check" CHECK ("tickets"."purpose" in ('verify_email', 'verify_phone', 'reset_password', 'change_email'))
);
--> statement-breakpoint
ALTER TABLE "tickets" ADD CONSTRAINT "tickets_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "tickets_secret_hash_idx" ON "tickets" USING btree ("secret_hash");--> statement-breakpoint
CREATE INDEX "tickets_user_purpose_idx" ON "tickets" USING btree ("user_id","purpose");--> statement-breakpoint
CREATE INDEX "tickets_expires_at_idx" ON "tickets" USING btree ("expires_at");