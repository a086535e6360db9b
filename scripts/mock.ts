// `pnpm mock`: the contract in spec/openapi.yaml served by Prism, behind a gate that refuses what
// the server refuses, with the server's own code (packages/server/src/mock-front.ts): tokens,
// methods, media types, JSON, the schema and the rules the spec states in words. What passes gets
// a documented example from Prism; `Prefer: example=NAME` or `Prefer: code=STATUS` picks one.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createMockFront } from '../packages/server/src/mock-front.ts';
import { serveApp } from '../packages/server/src/serve.ts';

const SPEC = fileURLToPath(new URL('../spec/openapi.yaml', import.meta.url));
const PRISM = fileURLToPath(new URL('../node_modules/.bin/prism', import.meta.url));

/** The token the mock accepts unless MOCK_TOKENS says otherwise. */
export const MOCK_TOKEN = 'ua_mock_token_for_integrators_0123456789abc';

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

/** Starts Prism with these arguments; resolves once it listens. */
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

/** Prism on a private port, and the gate on `port`. */
export async function startMock(options: { host: string; port: number; tokens: string[] }): Promise<RunningMock> {
  const prismPort = await freePort();
  const prism = await startPrism(['mock', '--host', '127.0.0.1', '--port', String(prismPort), SPEC]);
  const front = createMockFront({ upstream: `http://127.0.0.1:${prismPort}`, tokens: options.tokens });
  const server = await new Promise<ReturnType<typeof serveApp>>((resolve) => {
    const s = serveApp(front, { port: options.port, hostname: options.host }, () => resolve(s));
  });
  const { port } = server.address() as { port: number };
  return {
    baseUrl: `http://${options.host}:${port}`,
    async close() {
      prism.kill('SIGTERM');
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const tokens = (process.env.MOCK_TOKENS ?? MOCK_TOKEN)
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const mock = await startMock({ host: '127.0.0.1', port: Number(process.env.MOCK_PORT ?? 4010), tokens });
  process.stdout.write(
    `Mock of the user-accounts API on ${mock.baseUrl}\n` +
      `Authorization: ${process.env.MOCK_TOKENS ? '<one of MOCK_TOKENS>' : MOCK_TOKEN}\n` +
      'Pick an answer with Prefer: example=<name> or Prefer: code=<status>.\n',
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => void mock.close().then(() => process.exit(0)));
}
