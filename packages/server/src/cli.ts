// The operator CLI: `pnpm cli token create|list|revoke`, `pnpm cli audit tail`, `pnpm cli import`, `pnpm cli provider set|list|remove`, `pnpm cli template set|list|preview|remove`. It uses the same
// configuration as the server (DATABASE_URL, or the embedded database in DATA_DIR).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig, providerClientSecret, senderSecrets, sizeThreadPool } from './config/env.ts';
import { type Database, openPglite, openPostgres } from './db/client.ts';
import { lockDataDir } from './db/data-dir-lock.ts';
import { unsafeDataDir } from './db/file-safety.ts';
import { factorKeysFor } from './factors/key-file.ts';
import { callAdminSocket } from './ops/admin-socket.ts';
import {
  type CommandResult,
  commandHelp,
  inlineClientSecret,
  inlineSchemaFile,
  inlineSenderSecrets,
  inlineTemplateFile,
  keyGenerate,
  planCommand,
  runCommand,
  USAGE,
} from './ops/commands.ts';
import { terminalSafe } from './ops/terminal.ts';
import { createPasswordHasher } from './passwords/hasher.ts';
import { createBreachedPasswords } from './passwords/screening.ts';
import { VERSION } from './version.ts';

async function run(argv: string[]): Promise<CommandResult> {
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h'))
    return { code: 0, stdout: commandHelp(argv) ?? `${USAGE}\n`, stderr: '' };
  if (argv[0] === 'key' && argv[1] === 'generate') {
    // Needs no configuration (a fresh host has none). Its note first, so that the key is the
    // last line a terminal shows, and the only one of stdout: FACTOR_ENCRYPTION_KEY=$(cli key generate).
    const { stderr, ...result } = keyGenerate(argv);
    if (result.code === 0) process.stderr.write(stderr);
    return { ...result, stderr: result.code === 0 ? '' : stderr };
  }
  if (argv[0] === '--version') return { code: 0, stdout: `${VERSION}\n`, stderr: '' };
  const config = loadConfig();
  argv = inlineClientSecret(inlineSchemaFile(argv), providerClientSecret());
  argv = inlineTemplateFile(inlineSenderSecrets(argv, senderSecrets()));
  // A server that runs the command (below, the embedded database) adds its own address; here, this
  // configuration's HOST and PORT, where no server answers for it.
  const handed = argv;
  if (argv[0] === 'console' && !argv.some((a) => a === '--url' || a.startsWith('--url='))) {
    const host = ['0.0.0.0', '::', ''].includes(config.host) ? '127.0.0.1' : config.host;
    argv = [...argv, '--url', `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`];
  }
  const planned = planCommand(argv, { webhookAllowPrivate: config.webhookAllowPrivate });
  if (typeof planned !== 'function') return planned;
  sizeThreadPool(config);
  let database: Database;
  let unlock = () => {};
  if (config.databaseUrl !== undefined) {
    database = await openPostgres(config.databaseUrl, { max: 1 });
  } else {
    if (!existsSync(join(config.dataDir, 'pgdata'))) {
      return {
        code: 1,
        stdout: '',
        stderr:
          `DATABASE_URL is not set and there is no embedded database in ${config.dataDir} (DATA_DIR) yet: ` +
          'set DATABASE_URL to use PostgreSQL, set DATA_DIR to the folder of an embedded one, or start the server once to make one there.\n',
      };
    }
    // Its socket could be anyone's in a folder others can write: the commands (and new tokens) with it.
    const unsafe = unsafeDataDir(config.dataDir);
    if (unsafe !== undefined) return { code: 1, stdout: '', stderr: `cli: ${unsafe}\n` };
    try {
      unlock = lockDataDir(config.dataDir);
    } catch {
      // A server runs on this folder and owns the database: let it run the command.
      return callAdminSocket(config.dataDir, handed).catch(() => ({
        code: 1,
        stdout: '',
        stderr: `A server runs on ${config.dataDir} but does not answer on its CLI socket; stop it and try again.\n`,
      }));
    }
    database = await openPglite(config.dataDir);
  }
  try {
    const hasher = createPasswordHasher({
      concurrency: config.hashConcurrency,
      maxWaiting: config.hashQueue,
      costlyConcurrency: config.hashCostlyConcurrency,
      params: config.passwordHash,
      costReference: config.passwordHashCostReference,
    });
    return await runCommand(
      argv,
      database.db,
      await database.migrate(),
      {
        hasher,
        progress: process.stderr,
        output: process.stdout,
        // Only the CLI's own import seals secrets; the warning is the server's to give.
        factorKeys: factorKeysFor(config, database.kind, () => {}),
        // An imported plain password is screened as the server's import screens it.
        breachedPasswords:
          config.breachedPasswords === undefined ? undefined : createBreachedPasswords(config.breachedPasswords),
      },
      { webhookAllowPrivate: config.webhookAllowPrivate },
    );
  } finally {
    await database.close();
    unlock();
  }
}

// Everything printed passes here (a command's data streamed to stdout by export escapes its own):
// what came from a file or the database cannot drive the terminal (see ops/terminal.ts).
try {
  const result = await run(process.argv.slice(2));
  process.stdout.write(terminalSafe(result.stdout));
  process.stderr.write(terminalSafe(result.stderr));
  process.exitCode = result.code;
} catch (error) {
  const message =
    error instanceof ConfigError ? error.message : `cli: ${error instanceof Error ? error.message : String(error)}`;
  process.stderr.write(terminalSafe(`${message}\n`));
  process.exitCode = 1;
}
