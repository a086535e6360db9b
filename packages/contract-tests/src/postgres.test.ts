import { defineAccessSuite } from './access-suite.ts';
import { defineContactsSuite } from './contacts-suite.ts';
import { defineEventsSuite } from './events-suite.ts';
import { defineImportSuite } from './import-suite.ts';
import { defineListSuite } from './list-suite.ts';
import { defineLoginSuite } from './login-suite.ts';
import { defineMetadataSuite } from './metadata-suite.ts';
import { defineSecuritySuite } from './security-suite.ts';
import { defineContractSuite } from './suite.ts';
import { defineTicketsSuite } from './tickets-suite.ts';
import { defineSuspensionSuite } from './suspension-suite.ts';
import { postgresTarget } from './targets.ts';
import { defineWritesSuite } from './writes-suite.ts';

// Runs when TEST_DATABASE_URL names a reachable PostgreSQL (CI sets it); otherwise it says why it skips.
const target = await postgresTarget();
defineContractSuite(target);
defineAccessSuite(target);
defineWritesSuite(target);
defineSecuritySuite(target);
defineLoginSuite(target);
defineImportSuite(target);
defineListSuite(target);
defineEventsSuite(target);
defineMetadataSuite(target);
defineContactsSuite(target);
defineTicketsSuite(target);
defineSuspensionSuite(target);
