import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { which } from './pieces.ts';

const dir = mkdtempSync(join(tmpdir(), 'ua-which-'));
const tool = join(dir, 'ua-only-in-sbin');
writeFileSync(tool, '#!/bin/sh\n');
chmodSync(tool, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('which', () => {
  it('finds a command in a system folder that is not on PATH, as Debian installs haproxy in /usr/sbin', () => {
    expect(process.env.PATH?.split(':')).not.toContain(dir);
    expect(which('ua-only-in-sbin', [dir])).toBe(tool);
  });

  it('finds a command on PATH, and nothing for a command that is nowhere', () => {
    expect(which('sh')).toMatch(/\/sh$/);
    expect(which('ua-no-such-command-anywhere', [dir])).toBeUndefined();
  });
});
