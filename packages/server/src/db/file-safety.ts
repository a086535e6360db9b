// The embedded database's folder holds the database, the dev token and the CLI's socket. Whoever
// can write in it can plant a dev-token the server then accepts, or replace the socket between
// its creation and its chmod (another local user won that race in a review). So the server and
// the CLI refuse a folder, and the server a token file, that anyone but their user could change,
// and say how to fix it. Not on Windows, whose files have no POSIX modes or owners.
import { statSync } from 'node:fs';

/** A path as the shell reads it back, for a command the operator can paste. */
const shellQuoted = (path: string) => (/^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`);

const octal = (mode: number) => `0${(mode & 0o777).toString(8).padStart(3, '0')}`;

function who(mode: number, bits: { group: number; others: number }): string {
  const group = (mode & bits.group) !== 0;
  const others = (mode & bits.others) !== 0;
  return group && others ? 'its group and other users' : group ? 'its group' : 'other users';
}

/**
 * Why the data folder is unsafe, or undefined when it is not: it must belong to this process's
 * user and be writable by nobody else.
 */
export function unsafeDataDir(dir: string): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const stat = statSync(dir);
  const quoted = shellQuoted(dir);
  if (stat.uid !== uid) {
    return (
      `the data folder ${dir} belongs to another user (uid ${stat.uid}), who could plant a dev-token or take the ` +
      `CLI socket there: set DATA_DIR to a folder of your own, or make this one yours (sudo chown -R ${uid} ${quoted})`
    );
  }
  if ((stat.mode & 0o022) !== 0) {
    return (
      `the data folder ${dir} can be written by ${who(stat.mode, { group: 0o020, others: 0o002 })} ` +
      `(mode ${octal(stat.mode)}), who could plant a dev-token or take the CLI socket there: run chmod 700 ${quoted}`
    );
  }
  return undefined;
}

/**
 * Why a file holding a secret is unsafe, or undefined when it is not (or does not exist): a
 * regular file of this process's user that nobody else can read or write.
 */
export function unsafeSecretFile(file: string): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const stat = statSync(file, { throwIfNoEntry: false });
  if (stat === undefined) return undefined;
  const quoted = shellQuoted(file);
  const remedy = `remove it if you did not put it there (the next start mints a new token)`;
  if (!stat.isFile()) return `${file} is not a regular file: ${remedy}`;
  if (stat.uid !== uid) {
    return `${file} belongs to another user (uid ${stat.uid}): ${remedy}, or make it yours (sudo chown ${uid} ${quoted})`;
  }
  if ((stat.mode & 0o077) !== 0) {
    return (
      `${file} holds an API token and can be read or written by ${who(stat.mode, { group: 0o070, others: 0o007 })} ` +
      `(mode ${octal(stat.mode)}): run chmod 600 ${quoted}, and ${remedy}`
    );
  }
  return undefined;
}
