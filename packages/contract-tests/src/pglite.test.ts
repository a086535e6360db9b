import { defineContractSuite } from './suite.ts';
import { pgliteTarget } from './targets.ts';

defineContractSuite(pgliteTarget);
