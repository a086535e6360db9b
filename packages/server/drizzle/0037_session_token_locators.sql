-- issue 57, G3: a session's tokens carry its locator (token_family, sealed with the generation), so a replaced token is recognised however many refreshes back; rows of such tokens are kept for the refresh window only, `lifelong` the others (every row before this).
ALTER TABLE "session_replaced_tokens" ADD COLUMN "lifelong" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "token_family" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "generation" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "session_replaced_tokens_passing_idx" ON "session_replaced_tokens" USING btree ("replaced_at") WHERE not "session_replaced_tokens"."lifelong";--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_token_family_idx" ON "sessions" USING btree ("token_family");--> statement-breakpoint
UPDATE "sessions" SET "generation" = "r"."seq" FROM (
	SELECT "session_id", max("seq") AS "seq" FROM "session_replaced_tokens" GROUP BY "session_id"
) AS "r" WHERE "r"."session_id" = "sessions"."id";
