import { defineContractSuite } from './suite.ts';
import { postgresTarget } from './targets.ts';

// Runs when TEST_DATABASE_URL names a reachable PostgreSQL (CI sets it); otherwise it says why it skips.
defineContractSuite(await postgresTarget());
