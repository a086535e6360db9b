import { defineAccessSuite } from './access-suite.ts';
import { defineSecuritySuite } from './security-suite.ts';
import { defineContractSuite } from './suite.ts';
import { defineWritesSuite } from './writes-suite.ts';
import { pgliteTarget } from './targets.ts';

defineContractSuite(pgliteTarget);
defineAccessSuite(pgliteTarget);
defineWritesSuite(pgliteTarget);
defineSecuritySuite(pgliteTarget);
