// The data suites (suites.ts) on the embedded database (PGlite), with CORS and tracing on (configured.ts).
import { defineConfiguredSuites } from './configured.ts';
import { DATA_SUITES } from './suites.ts';

defineConfiguredSuites(DATA_SUITES);
