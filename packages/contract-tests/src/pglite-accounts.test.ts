// The accounts suites (suites.ts) on the embedded database (PGlite).
import { ACCOUNT_SUITES, defineSuites } from './suites.ts';
import { pgliteTarget } from './targets.ts';

defineSuites(ACCOUNT_SUITES, pgliteTarget);
