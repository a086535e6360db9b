// The accounts suites (suites.ts) on PostgreSQL: runs when TEST_DATABASE_URL names a reachable one
// (CI sets it); otherwise each suite says why it skips.
import { ACCOUNT_SUITES, defineSuites } from './suites.ts';
import { postgresTarget } from './targets.ts';

defineSuites(ACCOUNT_SUITES, await postgresTarget());
