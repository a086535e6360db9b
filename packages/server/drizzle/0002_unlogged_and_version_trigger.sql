-- Rate-limit counters are not worth a WAL flush per request; a crash only restarts the windows.
ALTER TABLE "rate_limits" SET UNLOGGED;--> statement-breakpoint
-- The ETag is the row's version: bump it on every UPDATE, whoever the writer, so that a change
-- made outside the API can never leave a stale tag looking current.
CREATE FUNCTION "users_bump_version"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.version := OLD.version + 1;
  RETURN NEW;
END
$$;--> statement-breakpoint
CREATE TRIGGER "users_bump_version" BEFORE UPDATE ON "users"
  FOR EACH ROW EXECUTE FUNCTION "users_bump_version"();
