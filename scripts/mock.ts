// `pnpm mock`: Prism, serving the contract in spec/openapi.yaml with one difference. Prism answers
// every invalid request with a documented 422 when there is one, and the contract documents 422
// only for an Idempotency-Key reused with another body, which a stateless mock can never detect.
// So the mock is given the spec without its 422 responses, and answers invalid requests with the
// documented 400, as the server does. Nothing else is changed.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const SPEC = fileURLToPath(new URL('../spec/openapi.yaml', import.meta.url));
const PRISM = fileURLToPath(new URL('../node_modules/.bin/prism', import.meta.url));

/** Writes the spec as the mock serves it into a fresh temporary folder; returns its path. */
export function writeMockSpec(): string {
  const spec = parse(readFileSync(SPEC, 'utf8'));
  for (const item of Object.values<Record<string, { responses?: Record<string, unknown> }>>(spec.paths)) {
    for (const operation of Object.values(item)) delete operation.responses?.['422'];
  }
  const file = join(mkdtempSync(join(tmpdir(), 'ua-mock-')), 'openapi.yaml');
  writeFileSync(file, stringify(spec));
  return file;
}

export function prismArgs(file: string, host: string, port: number): string[] {
  return ['mock', '--host', host, '--port', String(port), file];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.MOCK_PORT ?? 4010);
  const child = spawn(PRISM, [...prismArgs(writeMockSpec(), '127.0.0.1', port), ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  child.on('exit', (code) => process.exit(code ?? 1));
}
