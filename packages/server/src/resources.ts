// Files the server reads at run time: the contract and the migrations. In the source tree they
// are where the repository keeps them; `pnpm build` copies both beside dist/main.js.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = new URL('.', import.meta.url);
const bundled = existsSync(new URL('openapi.yaml', here));

export const SPEC_PATH = bundled ? new URL('openapi.yaml', here) : new URL('../../../spec/openapi.yaml', here);
/**
 * The same contract as JSON, written by `pnpm build` beside it: parsing the 480 KB of YAML took
 * 45 MB of heap at start, which V8 kept (a built server's resident memory; issue 47). Absent in the
 * source tree, which parses the YAML.
 */
export const SPEC_JSON_PATH = bundled ? new URL('openapi.json', here) : undefined;
export const MIGRATIONS_DIR = fileURLToPath(bundled ? new URL('drizzle', here) : new URL('../drizzle', here));
/** Scalar's self-contained browser build, served as /docs/scalar.js: no CDN, no fonts from elsewhere. */
export const SCALAR_JS = bundled
  ? new URL('scalar.js', here)
  : new URL('browser/standalone.js', import.meta.resolve('@scalar/api-reference'));
/**
 * The console's built page and assets (packages/console, `vite build`): in the source tree where
 * the console package builds them, in dist/ where `pnpm build` copies them. Absent until built.
 */
export const CONSOLE_DIR = bundled ? new URL('console/', here) : new URL('../../console/dist/', here);
