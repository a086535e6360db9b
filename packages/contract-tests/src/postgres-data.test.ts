// The data suites (suites.ts) on PostgreSQL: runs when TEST_DATABASE_URL names a reachable one
// (CI sets it); otherwise each suite says why it skips.
import { DATA_SUITES, defineSuites } from './suites.ts';
import { postgresTarget } from './targets.ts';

defineSuites(DATA_SUITES, await postgresTarget());
