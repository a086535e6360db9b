-- OpenTelemetry (issue 27, finding 7): an event keeps the W3C traceparent of the write that made
-- it when tracing is on (runWrite sets user_accounts.traceparent for its transaction), so that its
-- webhook deliveries join the write's trace. current_setting is stable, not volatile: existing rows
-- take the default's value now (null) without a rewrite of the table.
ALTER TABLE "events" ADD COLUMN "traceparent" text DEFAULT nullif(current_setting('user_accounts.traceparent', true), '');