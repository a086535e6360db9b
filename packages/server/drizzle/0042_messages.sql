-- Issue 60: mail and text messages sent by us. A site's senders (cli site set --mail-from
-- --mail-transport --sms-transport --link-origins; passwords and keys sealed), its templates (cli
-- template set), and the message outbox written in the ticket's transaction (messages/worker.ts
-- sends it from any server; bodies sealed, deleted once sent).
CREATE TABLE "message_templates" (
	"site" text NOT NULL,
	"purpose" text NOT NULL,
	"lang" text NOT NULL,
	"subject" text NOT NULL,
	"text" text NOT NULL,
	"html" text,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "message_templates_site_purpose_lang_pk" PRIMARY KEY("site","purpose","lang")
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"id" uuid PRIMARY KEY NOT NULL,
	"site" text NOT NULL,
	"user_id" uuid NOT NULL,
	"channel" text NOT NULL,
	"purpose" text NOT NULL,
	"recipient" text NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"undeliverable" boolean DEFAULT false NOT NULL,
	"body_sealed" text,
	"next_attempt_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"leased_until" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"sent_at" timestamp (3) with time zone,
	CONSTRAINT "messages_status_check" CHECK ("messages"."status" in ('queued', 'sent', 'failed')),
	CONSTRAINT "messages_channel_check" CHECK ("messages"."channel" in ('email', 'sms'))
);
--> statement-breakpoint
CREATE TABLE "site_senders" (
	"site" text PRIMARY KEY NOT NULL,
	"mail_from" text,
	"mail_transport" text,
	"mail_password_sealed" text,
	"sms_url" text,
	"sms_header" text,
	"sms_key_sealed" text,
	"sms_body" text,
	"sms_countries" text[],
	"sms_daily_limit" integer,
	"daily_limit" integer,
	"link_origins" text[] DEFAULT '{}'::text[] NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "messages_due_idx" ON "messages" USING btree ("site","next_attempt_at","id") WHERE "messages"."status" = 'queued';--> statement-breakpoint
CREATE INDEX "messages_user_idx" ON "messages" USING btree ("site","user_id","created_at");--> statement-breakpoint
CREATE INDEX "messages_site_created_idx" ON "messages" USING btree ("site","created_at");