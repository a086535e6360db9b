// `pnpm mock`: the contract in spec/openapi.yaml served by Prism, behind a gate that refuses what
// the server refuses, with the server's own code (packages/mock/src/gate.ts): tokens,
// methods, media types, JSON, the schema and the rules the spec states in words. What passes gets
// a documented example from Prism; `Prefer: example=NAME` or `Prefer: code=STATUS` picks one.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '@stoplight/prism-core';
import { getHttpOperationsFromSpec } from '@stoplight/prism-http';
import { createServer as createPrismServer } from '@stoplight/prism-http-server';
import { serveApp } from '@user-accounts/server/serve';
import { createMockFront } from './gate.ts';

const SPEC = fileURLToPath(new URL('../../../spec/openapi.yaml', import.meta.url));
const PRISM = fileURLToPath(new URL('../../../node_modules/.bin/prism', import.meta.url));

/** The token the mock accepts unless MOCK_TOKENS says otherwise. */
export const MOCK_TOKEN = 'ua_mock_token_for_integrators_0123456789abc';

/** Starts the Prism CLI with these arguments (the tests' `prism proxy`); resolves once it listens. */
export async function startPrism(args: string[]): Promise<ChildProcess> {
  const prism: ChildProcess = spawn(PRISM, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`Prism did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Prism is listening')) {
        clearTimeout(timer);
        prism.stdout!.removeListener('data', onData);
        prism.stdout!.resume();
        prism.stderr!.resume();
        resolve();
      }
    };
    prism.stdout!.on('data', onData);
    prism.stderr!.on('data', onData);
    prism.on('exit', (code) => reject(new Error(`Prism exited (${code}):\n${output}`)));
  });
  return prism;
}

export interface RunningMock {
  baseUrl: string;
  close(): Promise<void>;
}

/** The origin of the browser example's dev server (`pnpm --filter @user-accounts/browser-example dev`). */
export const BROWSER_EXAMPLE_ORIGINS = ['http://127.0.0.1:5173', 'http://localhost:5173'];

/**
 * Prism in this process, listening on a Unix socket in a private (0700) folder, so that nothing
 * but the gate can reach it: no other user, no web page, no request the gate did not check.
 */
async function startPrismOnSocket(): Promise<{ socket: string; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'ua-mock-'));
  const socket = join(dir, 'prism.sock');
  const operations = await getHttpOperationsFromSpec(SPEC);
  const server = createPrismServer(operations, {
    cors: false, // the gate answers CORS, for the listed origins only
    config: {
      validateRequest: true,
      validateResponse: true,
      checkSecurity: true,
      errors: false,
      upstreamProxy: undefined,
      mock: { dynamic: false },
      isProxy: false,
    },
    components: { logger: createLogger('mock', { level: 'silent' }) },
  } as Parameters<typeof createPrismServer>[1]);
  await server.listen(socket as unknown as number);
  return {
    socket,
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Prism on a private socket, and the gate on `port`. */
export async function startMock(options: {
  host: string;
  port: number;
  tokens: string[];
  corsOrigins?: string[];
}): Promise<RunningMock> {
  const prism = await startPrismOnSocket();
  const front = createMockFront({
    upstreamSocket: prism.socket,
    tokens: options.tokens,
    corsOrigins: options.corsOrigins ?? BROWSER_EXAMPLE_ORIGINS,
  });
  const server = await new Promise<ReturnType<typeof serveApp>>((resolve) => {
    const s = serveApp(front, { port: options.port, hostname: options.host }, () => resolve(s));
  });
  const { port } = server.address() as { port: number };
  return {
    baseUrl: `http://${options.host}:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await prism.close();
    },
  };
}

const list = (value: string | undefined) =>
  (value ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const tokens = process.env.MOCK_TOKENS ? list(process.env.MOCK_TOKENS) : [MOCK_TOKEN];
  const corsOrigins = process.env.MOCK_CORS_ORIGINS ? list(process.env.MOCK_CORS_ORIGINS) : BROWSER_EXAMPLE_ORIGINS;
  const mock = await startMock({ host: '127.0.0.1', port: Number(process.env.MOCK_PORT ?? 4010), tokens, corsOrigins });
  process.stdout.write(
    `Mock of the user-accounts API on ${mock.baseUrl}\n` +
      `Authorization: ${process.env.MOCK_TOKENS ? '<one of MOCK_TOKENS>' : MOCK_TOKEN}\n` +
      `Browsers may call it from: ${corsOrigins.join(', ')} (MOCK_CORS_ORIGINS)\n` +
      'Pick an answer with Prefer: example=<name> or Prefer: code=<status>.\n',
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => void mock.close().then(() => process.exit(0)));
}
