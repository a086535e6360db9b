// The contract suites, in three groups of about equal length, each run on the embedded database
// (pglite-*.test.ts) and on PostgreSQL (postgres-*.test.ts): six files rather than two, so that
// vitest's workers can run them side by side. Every suite starts its own server and database, so
// no two files share state.
import { defineAccessSuite } from './access-suite.ts';
import { defineBreachedSuite } from './breached-suite.ts';
import { defineContactsSuite } from './contacts-suite.ts';
import { defineDeletionSuite } from './deletion-suite.ts';
import { defineEventsSuite } from './events-suite.ts';
import { defineFactorsSuite } from './factors-suite.ts';
import { defineImportSuite } from './import-suite.ts';
import { defineListSuite } from './list-suite.ts';
import { defineLoginSuite } from './login-suite.ts';
import { defineMetadataSuite } from './metadata-suite.ts';
import { definePasskeysSuite } from './passkeys-suite.ts';
import { defineProvidersSuite } from './providers-suite.ts';
import { defineSecuritySuite } from './security-suite.ts';
import { defineContractSuite } from './suite.ts';
import { defineSuspensionSuite } from './suspension-suite.ts';
import type { TargetSpec } from './targets.ts';
import { defineTicketsSuite } from './tickets-suite.ts';
import { defineUserDataSuite } from './user-data-suite.ts';
import { defineWebhookApiSuite } from './webhook-api-suite.ts';
import { defineWritesSuite } from './writes-suite.ts';

export type Define = (target: TargetSpec) => void;

/** The original four operations, access, writes and the security cases. */
export const ACCOUNT_SUITES: Define[] = [
  defineContractSuite,
  defineAccessSuite,
  defineWritesSuite,
  defineSecuritySuite,
];

/** Login, import, list, events, metadata and contacts. */
export const DATA_SUITES: Define[] = [
  defineLoginSuite,
  defineImportSuite,
  defineListSuite,
  defineEventsSuite,
  defineMetadataSuite,
  defineContactsSuite,
];

/** Second factors, tickets, suspension, deletion, webhooks, sign-in providers, a person's data, breached passwords. */
export const LIFE_SUITES: Define[] = [
  defineFactorsSuite,
  definePasskeysSuite,
  defineTicketsSuite,
  defineSuspensionSuite,
  defineDeletionSuite,
  defineWebhookApiSuite,
  defineProvidersSuite,
  defineUserDataSuite,
  defineBreachedSuite,
];

export const defineSuites = (suites: Define[], target: TargetSpec) => {
  for (const define of suites) define(target);
};
