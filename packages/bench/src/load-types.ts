// The shapes every scenario's load shares (bench.ts makes the load; sessions.ts, orgs.ts and
// hot-path.ts describe theirs with them).

/** The request number i of a load: what autocannon sends. */
export type Make = (i: number) => {
  method?: 'GET' | 'POST' | 'DELETE';
  path: string;
  body?: string;
  headers?: Record<string, string>;
};

/** One load's figures. */
export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  /** Requests answered in the measured seconds. */
  requests: number;
  perSecond: number[];
  bad: number;
}

/** A server of a scenario, started for a round. */
export interface Server {
  url: string;
  stop(): Promise<void>;
}
