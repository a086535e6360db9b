// Prometheus metrics, on a registry of the app's own (never prom-client's global one, so that
// several apps in one process, as in the tests, do not collide).

import { sql } from 'drizzle-orm';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { type Database, rows } from '../db/client.ts';
import type { PasswordHasher } from '../passwords/hasher.ts';

export interface Metrics {
  registry: Registry;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  observeHash(seconds: number): void;
  /** A webhook attempt's outcome, its time, and (delivered) the time from the event's commit. */
  observeDelivery(outcome: 'delivered' | 'failed' | 'given_up', attemptSeconds: number, latencySeconds?: number): void;
  /** A provider/callback's outcome (its status text or problem code), by the provider's name. */
  observeProviderCallback(provider: string, outcome: string): void;
}

const PING_TIMEOUT_MS = 1_000;

export function createMetrics(sources: {
  database: Database;
  hasher: () => PasswordHasher | undefined;
  poolSize: number;
  /** The `replica` label of every series (REPLICA_NAME, else the host's name; issue 64). */
  replica?: string;
}): Metrics {
  const registry = new Registry();
  // Not `instance`: Prometheus sets that label itself (the scraped address) and would rename ours.
  if (sources.replica !== undefined) registry.setDefaultLabels({ replica: sources.replica });
  collectDefaultMetrics({ register: registry });
  // prom-client's totals of active handles, requests and resources are gauges named `_total`,
  // a suffix the exposition format keeps for counters (`promtool check metrics` fails on them).
  // The same totals are `sum(nodejs_active_handles)` etc. over the per-type gauges kept beside them.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
    registry.removeSingleMetric(name);
  }
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'Requests answered, by route, method and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer a request, by route, method and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const hashes = new Histogram({
    name: 'password_hash_duration_seconds',
    help: 'Time to compute one argon2id hash, queueing excluded.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [registry],
  });
  new Gauge({
    name: 'password_hash_in_progress',
    help: 'Password hashes running now.',
    registers: [registry],
    collect() {
      this.set(sources.hasher()?.load.running ?? 0);
    },
  });
  new Gauge({
    name: 'password_hash_queue_depth',
    help: 'Password hashes waiting for a slot now.',
    registers: [registry],
    collect() {
      this.set(sources.hasher()?.load.waiting ?? 0);
    },
  });
  new Gauge({
    name: 'db_pool_max_connections',
    help: 'Connections the database pool may open (1 on the embedded database).',
    registers: [registry],
    collect() {
      this.set(sources.poolSize);
    },
  });
  // The database's answer time as seen from here, measured at each scrape: a query through the
  // same pool, so it also shows a pool that is saturated.
  new Gauge({
    name: 'db_ping_seconds',
    help: 'Time for the database to answer select 1 through the pool, at scrape time; -1 when it did not answer within 1 s.',
    registers: [registry],
    async collect() {
      const started = performance.now();
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          sources.database.ping(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('timeout')), PING_TIMEOUT_MS);
          }),
        ]);
        this.set((performance.now() - started) / 1000);
      } catch {
        this.set(-1);
      } finally {
        clearTimeout(timer);
      }
    },
  });
  const deliveries = new Counter({
    name: 'webhook_attempts_total',
    help: 'Webhook delivery attempts by this server, by outcome: delivered (2xx), failed (retried later), given_up (after 3 days).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const deliveryLatency = new Histogram({
    name: 'webhook_delivery_latency_seconds',
    help: "From an event's commit to its receiver's 2xx, for deliveries by this server (retries included).",
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600],
    registers: [registry],
  });
  const providerCallbacks = new Counter({
    name: 'provider_callbacks_total',
    help: 'provider/callback answers by this server, by provider name and outcome (identity verified, user created, or the problem code).',
    labelNames: ['provider', 'outcome'] as const,
    registers: [registry],
  });
  // What the whole deployment has, read from the database at scrape time (any server answers the same).
  const fromDatabase = <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
    rows<T>(sources.database.db, query).catch(() => [] as T[]);
  new Gauge({
    name: 'events_written',
    help: "Change events written so far, every site together (the sum of the sites' last sequence numbers).",
    registers: [registry],
    async collect() {
      const [row] = await fromDatabase<{ n: string | null }>(sql`select sum(last)::text as n from event_sequences`);
      this.set(Number(row?.n ?? 0));
    },
  });
  new Gauge({
    name: 'webhook_pending_deliveries',
    help: 'Webhook deliveries not yet delivered nor given up (the retry queue), by endpoint.',
    labelNames: ['endpoint'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const found = await fromDatabase<{ endpoint: string; n: number; oldest: number }>(
        sql`select endpoint_id::text as endpoint, count(*)::int as n from webhook_deliveries where state = 'pending' group by endpoint_id`,
      );
      for (const row of found) this.set({ endpoint: row.endpoint }, row.n);
    },
  });
  new Gauge({
    name: 'webhook_oldest_pending_seconds',
    help: 'Age of the oldest undelivered delivery, by endpoint.',
    labelNames: ['endpoint'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const found = await fromDatabase<{ endpoint: string; age: number }>(
        sql`select endpoint_id::text as endpoint, extract(epoch from now() - min(created_at))::float8 as age
          from webhook_deliveries where state = 'pending' group by endpoint_id`,
      );
      for (const row of found) this.set({ endpoint: row.endpoint }, row.age);
    },
  });

  return {
    registry,
    observeDelivery(outcome, attemptSeconds, latencySeconds) {
      deliveries.inc({ outcome });
      if (latencySeconds !== undefined) deliveryLatency.observe(latencySeconds);
      void attemptSeconds;
    },
    observeRequest(method, route, status, seconds) {
      const labels = { method, route, status: String(status) };
      requests.inc(labels);
      durations.observe(labels, seconds);
    },
    observeHash: (seconds) => hashes.observe(seconds),
    observeProviderCallback: (provider, outcome) => providerCallbacks.inc({ provider, outcome }),
  };
}
