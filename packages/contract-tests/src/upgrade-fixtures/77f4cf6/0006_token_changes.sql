-- Servers keep accepted tokens in memory and drop them when told that a token changed: every
-- change but the batched last-used time (which would drop every cache at every flush), whoever
-- makes it (the CLI, another server, an operator's own SQL), notifies at commit.
CREATE FUNCTION "api_tokens_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('ua_tokens', '');
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "api_tokens_notify" AFTER UPDATE OF "token_hash", "site", "scopes", "expires_at", "revoked_at" OR DELETE ON "api_tokens"
  FOR EACH STATEMENT EXECUTE FUNCTION "api_tokens_notify"();
