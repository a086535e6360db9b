import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { Database } from './db/client.ts';
import type { PasswordHasher } from './passwords.ts';
import type { TokenVerifier } from './tokens.ts';
import type { Validators } from './validation.ts';

/** What the handlers need, handed in by main.ts or a test; nothing is a module-level singleton. */
export interface AppDeps {
  database: Database;
  tokens: TokenVerifier;
  hasher: PasswordHasher;
  logger: Logger;
}

export interface AppEnv {
  Variables: {
    requestId: string;
    deps: AppDeps;
    validators: Validators;
    /** The parsed JSON body, set by the json-body middleware. */
    body: unknown;
  };
}

export type App = Hono<AppEnv>;
