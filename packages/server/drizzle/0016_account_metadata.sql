-- An account's metadata (issue 28, point 1): the site's own JSON object on the account, `{}` when
-- none (a constant default: no table rewrite). A GIN index with jsonb_path_ops serves list's and
-- count's `metadata @> …` filter over the API's accounts; a site's JSON Schema for its metadata
-- lives in metadata_schemas (cli metadata-schema).
CREATE TABLE "metadata_schemas" (
	"site" text PRIMARY KEY NOT NULL,
	"schema" jsonb NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "metadata" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
CREATE INDEX "users_metadata_idx" ON "users" USING gin ("metadata" jsonb_path_ops) WHERE "users"."origin" = 'api';--> statement-breakpoint
-- RFC 7396 JSON Merge Patch, as update applies it to metadata inside its one UPDATE (no read-modify-
-- write: two concurrent updates of different keys both stay). A patch that is not an object
-- replaces the target; in an object, a null removes the key, an object merges in turn, anything
-- else replaces. plpgsql, as an SQL function cannot call itself when it is created.
CREATE FUNCTION jsonb_merge_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF jsonb_typeof(patch) IS DISTINCT FROM 'object' THEN
    RETURN patch;
  END IF;
  IF jsonb_typeof(target) IS DISTINCT FROM 'object' THEN
    target := '{}'::jsonb;
  END IF;
  RETURN (
    SELECT coalesce(jsonb_object_agg(merged.key, merged.value), '{}'::jsonb)
    FROM (
      SELECT t.key, t.value FROM jsonb_each(target) t WHERE NOT patch ? t.key
      UNION ALL
      SELECT p.key, jsonb_merge_patch(target -> p.key, p.value)
      FROM jsonb_each(patch) p WHERE jsonb_typeof(p.value) <> 'null'
    ) merged
  );
END
$$;
