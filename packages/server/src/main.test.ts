// The server as an operator runs it: `node src/main.ts`, configured by environment variables.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));
const children: ChildProcessWithoutNullStreams[] = [];
const dirs: string[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Running {
  child: ChildProcessWithoutNullStreams;
  baseUrl: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function run(env: Record<string, string>): Running & { ready: Promise<void> } {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', ...env },
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  const running = {
    child,
    baseUrl: '',
    stdout: () => stdout,
    stderr: () => stderr,
    exited: new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code))),
  } as Running;
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stdout);
      if (match && !running.baseUrl) {
        running.baseUrl = match[1]!;
        resolve();
      }
    });
    child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
    void running.exited.then((code) => reject(new Error(`exited with ${code}: ${stderr}`)));
  });
  ready.catch(() => {}); // awaited only by the tests that expect a start
  return Object.assign(running, { ready });
}

const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ua-main-'));
  dirs.push(dir);
  return dir;
};

describe('main', () => {
  it('mints a dev token once on a fresh embedded database, keeps data across a graceful restart', async () => {
    const dir = dataDir();
    const first = run({ DATA_DIR: dir });
    await first.ready;
    const token = readFileSync(join(dir, 'dev-token'), 'utf8').trim();
    expect(token).toMatch(/^ua_[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(dir, 'dev-token')).mode & 0o777).toBe(0o600);
    expect(first.stderr()).toContain(token);
    expect(first.stdout()).not.toContain(token);

    const headers = { Authorization: token, 'Content-Type': 'application/json' };
    // A create in flight when SIGTERM arrives still completes.
    const pending = fetch(`${first.baseUrl}/api/1/user/create`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email: 'kept@example.com', password: 'kept across restarts', name: 'Kept' }),
    });
    await new Promise((r) => setTimeout(r, 5));
    first.child.kill('SIGTERM');
    const created = await pending;
    expect(created.status).toBe(201);
    const { result } = (await created.json()) as { result: { _userId: string } };
    expect(await first.exited).toBe(0);
    expect(first.stdout()).toContain('"msg":"stopped"');

    const second = run({ DATA_DIR: dir });
    await second.ready;
    expect(second.stderr()).not.toContain(token);
    const got = await fetch(`${second.baseUrl}/api/1/user/get?_userId=${result._userId}`, { headers });
    expect(got.status).toBe(200);

    // The embedded database is single-process: a second server on the same folder must refuse.
    const intruder = run({ DATA_DIR: dir });
    expect(await intruder.exited).toBe(1);
    expect(intruder.stderr()).toMatch(/in use by another server/);

    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
  }, 60_000);

  it.each([
    [{ PORT: 'eighty' }, /PORT must be a whole number/],
    [{ PORT: '70000' }, /PORT must be a whole number/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be a postgres/],
    [{ API_TOKENS: 'short' }, /API_TOKENS entry 1 must be/],
    [{ DATABASE_URL: 'postgres://127.0.0.1:5432/test' }, /API_TOKENS is required when DATABASE_URL is set/],
  ])('refuses to start with %o, naming the variable', async (env, message) => {
    const server = run({ DATA_DIR: dataDir(), ...env });
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(message);
    expect(server.stderr()).not.toContain('short'.repeat(2));
  });
});
