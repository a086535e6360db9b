import { defineAccessSuite } from './access-suite.ts';
import { defineEventsSuite } from './events-suite.ts';
import { defineImportSuite } from './import-suite.ts';
import { defineListSuite } from './list-suite.ts';
import { defineLoginSuite } from './login-suite.ts';
import { defineSecuritySuite } from './security-suite.ts';
import { defineContractSuite } from './suite.ts';
import { pgliteTarget } from './targets.ts';
import { defineWritesSuite } from './writes-suite.ts';

defineContractSuite(pgliteTarget);
defineAccessSuite(pgliteTarget);
defineWritesSuite(pgliteTarget);
defineSecuritySuite(pgliteTarget);
defineLoginSuite(pgliteTarget);
defineImportSuite(pgliteTarget);
defineListSuite(pgliteTarget);
defineEventsSuite(pgliteTarget);
