-- Fair webhook claims (issue 26, finding 5; webhooks/worker.ts): each endpoint's due deliveries
-- are read by their own index range, a few per endpoint in turn, and the deliveries in flight
-- per endpoint are counted from a small index of the leased ones. The claim no longer reads all
-- sites' due deliveries in one order, so their index goes: a server older than this migration
-- still works, its claim reading the pending deliveries without it.
DROP INDEX "webhook_deliveries_due_idx";--> statement-breakpoint
CREATE INDEX "webhook_deliveries_endpoint_due_idx" ON "webhook_deliveries" USING btree ("endpoint_id","next_attempt_at","id") WHERE "webhook_deliveries"."state" = 'pending';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_leased_idx" ON "webhook_deliveries" USING btree ("endpoint_id","leased_until") WHERE "webhook_deliveries"."state" = 'pending' and "webhook_deliveries"."leased_until" is not null;
