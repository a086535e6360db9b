-- Issue 60: an invitation is sent by us too. Its message names the organization (org_id), and its
-- account only when one of the site holds the address (user_id nullable); an address's messages
-- of the hour (the invitation's budget) by messages_recipient_idx; a site's leased messages (the
-- claim's cap) by messages_leased_idx, a few rows whatever its backlog.
ALTER TABLE "messages" ALTER COLUMN "user_id" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "messages" ADD COLUMN "org_id" uuid;--> statement-breakpoint
CREATE INDEX "messages_recipient_idx" ON "messages" USING btree ("site",lower("recipient"),"created_at");--> statement-breakpoint
CREATE INDEX "messages_leased_idx" ON "messages" USING btree ("site","leased_until") WHERE "messages"."status" = 'queued' and "messages"."leased_until" is not null;--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_owner_check" CHECK ("messages"."user_id" is not null or "messages"."org_id" is not null);