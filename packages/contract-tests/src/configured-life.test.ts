// The life suites (suites.ts) on the embedded database (PGlite), with CORS and tracing on (configured.ts).
import { defineConfiguredSuites } from './configured.ts';
import { LIFE_SUITES } from './suites.ts';

defineConfiguredSuites(LIFE_SUITES);
