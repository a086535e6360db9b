// The release's version, written in one place: the root package.json's "version" (semver; see
// CHANGELOG.md). build.ts writes it into the bundle; from the source tree it is read from there.
import { readFileSync } from 'node:fs';

declare const __USER_ACCOUNTS_VERSION__: string | undefined;

export const VERSION: string =
  typeof __USER_ACCOUNTS_VERSION__ === 'string'
    ? __USER_ACCOUNTS_VERSION__
    : (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string })
        .version;
