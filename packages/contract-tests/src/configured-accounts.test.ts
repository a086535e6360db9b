// The accounts suites (suites.ts) on the embedded database (PGlite), with CORS and tracing on (configured.ts).
import { defineConfiguredSuites } from './configured.ts';
import { ACCOUNT_SUITES } from './suites.ts';

defineConfiguredSuites(ACCOUNT_SUITES);
