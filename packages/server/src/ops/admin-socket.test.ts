import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../db/client.ts';
import { silentLogger } from '../testing/loggers.ts';
import { adminSocketPath, serveAdminSocket } from './admin-socket.ts';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('serveAdminSocket', () => {
  it('creates the socket with mode 0600 even under umask 000, and gives the umask back', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ua-socket-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const previous = process.umask(0o000);
    cleanups.push(() => process.umask(previous));

    const socket = serveAdminSocket(dir, {} as Db, silentLogger(), { webhookAllowPrivate: false });
    cleanups.push(() => socket.close());
    // Right after the call, before any callback could have run: the moment another user raced for.
    const stat = statSync(adminSocketPath(dir));
    expect(stat.isSocket()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o600);
    expect(process.umask(0o000)).toBe(0o000);
  });
});
