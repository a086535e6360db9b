// The embedded database belongs to the one server process that opened it, so while that server
// runs, the CLI hands its command to the server through a Unix socket in the data folder. The
// socket is as private as the data folder itself (mode 0600 in a folder only its user can write):
// whoever can use it could read the database files anyway.
import { rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Db } from '../db/client.ts';
import { describeError } from '../errors.ts';
import { type CommandResult, type CommandSettings, runCommand } from './commands.ts';

export const adminSocketPath = (dataDir: string) => join(dataDir, 'admin.sock');

export function serveAdminSocket(
  dataDir: string,
  db: Db,
  logger: Logger,
  settings: CommandSettings,
): { close(): void } {
  const path = adminSocketPath(dataDir);
  rmSync(path, { force: true }); // left by a server that was killed
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 65_536) req.destroy();
    });
    req.on('end', () => {
      void (async () => {
        let result: CommandResult;
        try {
          const { argv } = JSON.parse(body) as { argv: string[] };
          result = await runCommand(argv, db, undefined, undefined, settings);
          logger.info({ command: argv.slice(0, 2).join(' '), code: result.code }, 'cli command');
        } catch (error) {
          logger.error({ err: describeError(error) }, 'cli command failed');
          result = { code: 1, stdout: '', stderr: 'The command failed; see the server log.\n' };
        }
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(result));
      })();
    });
  });
  server.on('error', (error) =>
    logger.warn({ err: describeError(error) }, 'cli socket unavailable; stop the server to use the CLI'),
  );
  // Born 0600: a chmod after listen() left a moment in which another user could connect (a
  // review won that race with umask 000). listen() binds synchronously, so the umask is ours only
  // for that call.
  const umask = process.umask(0o177);
  try {
    server.listen(path);
  } finally {
    process.umask(umask);
  }
  server.unref();
  return {
    close() {
      server.close();
      rmSync(path, { force: true });
    },
  };
}

export function callAdminSocket(dataDir: string, argv: string[]): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: adminSocketPath(dataDir), path: '/run', method: 'POST' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        try {
          resolve(JSON.parse(body) as CommandResult);
        } catch (error) {
          reject(error);
        }
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify({ argv }));
  });
}
