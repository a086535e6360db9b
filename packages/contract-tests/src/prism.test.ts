import { defineContractSuite } from './suite.ts';
import { prismTarget } from './targets.ts';

defineContractSuite(prismTarget);
