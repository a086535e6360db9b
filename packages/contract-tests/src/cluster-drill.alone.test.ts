// Issue 62: `./pnpmw cluster drill`, the HA cluster's drill (packages/cluster/src/drill.ts), run
// whole: etcd and three PostgreSQL nodes under Patroni (synchronous_mode) behind HAProxy's Patroni
// backend, three replicas, a mixed load through HAProxy. The leader SIGKILLed, then the next one
// cut off from etcd (its Patroni SIGSTOPped), then a backup under load and a point-in-time restore
// into a fresh node. Nothing in the test or the drill promotes anything: Patroni does. Every
// figure the drill prints is a line of this test's output; a figure out of bounds fails it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { haClusterUnavailable } from '@user-accounts/cluster';
import { BOUNDS, drill } from '@user-accounts/cluster/drill';
import { builtEntry } from '@user-accounts/server/testing/build';
import { describe, expect, it } from 'vitest';

const unavailable = haClusterUnavailable();
if (unavailable !== undefined) console.warn(`\n[contract-tests] cluster drill: SKIPPED, ${unavailable}\n`);
const withHa = unavailable === undefined ? describe : describe.skip;

withHa('./pnpmw cluster drill: Patroni, etcd, pgBackRest under the cluster', () => {
  it('a leader killed, then one cut off from etcd: a new leader within 30 s each, 0 acknowledged writes lost, no 500, sessions verify, the old leader rejoins; a point-in-time restore holds the first write and not the second, migrates as a no-op and serves logins', async () => {
    const serverMain = builtEntry('main.js');
    const serverCli = builtEntry('cli.js');
    const result = await drill({
      dir: mkdtempSync(join(tmpdir(), 'ua-drill-')),
      ...(serverMain === undefined ? {} : { serverMain }),
      ...(serverCli === undefined ? {} : { serverCli }),
      print: (line) => console.log(`[drill] ${line}`),
    });
    expect(result.failures).toEqual([]);
    for (const phase of ['kill', 'etcd-cut']) {
      expect(result.figures[`${phase}.writesBackMs`]).toBeLessThanOrEqual(BOUNDS.writesBackMs);
      expect(result.figures[`${phase}.lost`]).toBe(0);
      expect(result.figures[`${phase}.500`]).toBe(0);
      // The failover was there to see: requests were refused meanwhile (503s), then served again.
      expect(result.figures[`${phase}.503`]).toBeGreaterThan(0);
      expect(result.figures[`${phase}.rejoinMs`]).toBeDefined();
    }
    expect(result.lines).toContain('drill: passed');
  }, 400_000);
});
