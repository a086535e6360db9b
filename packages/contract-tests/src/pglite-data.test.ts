// The data suites (suites.ts) on the embedded database (PGlite).
import { DATA_SUITES, defineSuites } from './suites.ts';
import { pgliteTarget } from './targets.ts';

defineSuites(DATA_SUITES, pgliteTarget);
