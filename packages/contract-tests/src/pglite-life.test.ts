// The life suites (suites.ts) on the embedded database (PGlite).
import { defineSuites, LIFE_SUITES } from './suites.ts';
import { pgliteTarget } from './targets.ts';

defineSuites(LIFE_SUITES, pgliteTarget);
