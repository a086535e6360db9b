// The life suites (suites.ts) on PostgreSQL: runs when TEST_DATABASE_URL names a reachable one
// (CI sets it); otherwise each suite says why it skips.
import { defineSuites, LIFE_SUITES } from './suites.ts';
import { postgresTarget } from './targets.ts';

defineSuites(LIFE_SUITES, await postgresTarget());
