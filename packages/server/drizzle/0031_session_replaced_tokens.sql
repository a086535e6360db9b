-- issue 43 (session/refresh): every token a refresh replaced, by its SHA-256, so a replay of any of them revokes the session.
CREATE TABLE "session_replaced_tokens" (
	"token_hash" text PRIMARY KEY NOT NULL,
	"session_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"replaced_at" timestamp (3) with time zone NOT NULL,
	"successor_masks" text
);
--> statement-breakpoint
ALTER TABLE "session_replaced_tokens" ADD CONSTRAINT "session_replaced_tokens_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "session_replaced_tokens_session_seq_idx" ON "session_replaced_tokens" USING btree ("session_id","seq");--> statement-breakpoint
CREATE INDEX "session_replaced_tokens_masked_idx" ON "session_replaced_tokens" USING btree ("replaced_at") WHERE "session_replaced_tokens"."successor_masks" is not null;--> statement-breakpoint
INSERT INTO "session_replaced_tokens" ("token_hash", "session_id", "seq", "replaced_at")
	SELECT "previous_token_hash", "id", 1, "rotated_at" FROM "sessions"
	WHERE "previous_token_hash" IS NOT NULL AND "rotated_at" IS NOT NULL
	ON CONFLICT DO NOTHING;
