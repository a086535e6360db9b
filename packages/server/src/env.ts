// The only module that reads process.env. Every bad variable is reported at once, by name.
import { resolve } from 'node:path';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  port: number;
  host: string;
  /** postgres:// URL; absent means the embedded PGlite database in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  /** Tokens accepted as configured by the operator; never logged. */
  apiTokens: string[];
  logLevel: LogLevel;
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const value = (name: string) => {
    const raw = env[name]?.trim();
    return raw === '' ? undefined : raw;
  };

  let port = 3000;
  const rawPort = value('PORT');
  if (rawPort !== undefined) {
    port = Number(rawPort);
    if (!/^\d+$/.test(rawPort) || port > 65535) {
      problems.push(`PORT must be a whole number from 0 to 65535 (got "${rawPort}")`);
    }
  }

  const host = value('HOST') ?? '127.0.0.1';

  const databaseUrl = value('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    problems.push('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }

  const dataDir = resolve(value('DATA_DIR') ?? './data');

  const apiTokens = (value('API_TOKENS') ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  // Never echo a token back, not even a bad one: say which entry is wrong.
  apiTokens.forEach((token, i) => {
    if (token.length < 20 || token.length > 256 || !/^[\x21-\x7e]+$/.test(token)) {
      problems.push(
        `API_TOKENS entry ${i + 1} must be 20 to 256 printable ASCII characters without spaces`,
      );
    }
  });

  const rawLevel = value('LOG_LEVEL') ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(rawLevel)) {
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${rawLevel}")`);
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return { port, host, databaseUrl, dataDir, apiTokens, logLevel: rawLevel as LogLevel };
}
