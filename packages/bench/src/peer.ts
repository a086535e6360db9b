// The peer: Better Auth, what a TypeScript team would most likely pick instead of this service,
// served as its documentation shows (its handler mounted on Hono, @hono/node-server, a `pg` Pool)
// on the same Node and the same PostgreSQL, with the same argon2id parameters as ours through
// its password hooks. `node peer.ts --migrate` creates its tables in DATABASE_URL and exits;
// `node peer.ts` serves on PORT (0: any) and prints "listening on http://127.0.0.1:<port>".
//
// Settings, each chosen so that the two do the same work (the report says so too):
// - rate limiter off: ours runs with its limits raised out of reach, so both run without one;
// - sign-up does not sign in (`autoSignIn: false`): our create makes an account, not a session;
// - no cookie cache (its default): get-session reads the session and its user from the database,
//   as our get reads the account; a cookie cache would answer from the cookie without a query;
// - telemetry off and OpenTelemetry spans off: ours has neither;
// - passwords up to 256 characters, as ours (Better Auth's default stops at 128);
// - joins on (`advanced.database.joins`, opt-in): get-session reads the session and its user in
//   one query, as our get reads the account in one, rather than two (about 10% faster, measured).
// Left as Better Auth ships them: its CSRF/origin checks, session refresh (after a day: none in
// a run), no per-request log (ours logs a line per request, its default).
import { serve } from '@hono/node-server';
import { hash, verify } from '@node-rs/argon2';
import { type BetterAuthOptions, betterAuth } from 'better-auth';
import { getMigrations } from 'better-auth/db/migration';
import { Hono } from 'hono';
import { Pool } from 'pg';
import { ARGON2ID, PEER_SECRET } from './params.ts';

const pool = new Pool({ connectionString: process.env.DATABASE_URL!, max: 10 });

const options = (baseURL: string): BetterAuthOptions => ({
  baseURL,
  secret: PEER_SECRET,
  database: pool,
  emailAndPassword: {
    enabled: true,
    autoSignIn: false,
    maxPasswordLength: 256,
    password: {
      hash: (password: string) => hash(password, ARGON2ID),
      verify: ({ hash: stored, password }: { hash: string; password: string }) => verify(stored, password),
    },
  },
  rateLimit: { enabled: false },
  advanced: { database: { joins: true } },
  telemetry: { enabled: false },
  experimental: { instrumentation: { enabled: false } },
});

if (process.argv.includes('--migrate')) {
  const { runMigrations } = await getMigrations(options('http://127.0.0.1'));
  await runMigrations();
  await pool.end();
} else {
  // Better Auth wants its own address; it is known once the server listens, before any request.
  let auth: { handler(request: Request): Promise<Response> } | undefined;
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.on(['GET', 'POST'], '/api/auth/*', (c) => auth!.handler(c.req.raw));
  serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' }, (info) => {
    auth = betterAuth(options(`http://127.0.0.1:${info.port}`));
    process.stdout.write(`listening on http://127.0.0.1:${info.port}\n`);
  });
}
