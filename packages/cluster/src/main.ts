// ./pnpmw cluster up [--ha]|down|status|backup|restore|drill: the deploy/ topology on this
// machine (see topology.ts; --ha: patroni.ts, and drill.ts for the drill).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drill } from './drill.ts';
import { attach, clusterUnavailable, haClusterUnavailable, up } from './topology.ts';

const DIR = process.env.CLUSTER_DIR ?? join(fileURLToPath(new URL('../../../', import.meta.url)), '.cluster');
const USAGE = `usage: ./pnpmw cluster up [--ha] [--port 8080] | down | status | backup | restore --to <time> | drill [--keep]
  (kept in .cluster/, or CLUSTER_DIR; backup and restore need a cluster started with --ha)`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'up') {
    const at = rest.indexOf('--port');
    const port = at === -1 ? 8080 : Number(rest[at + 1]);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      console.error(USAGE);
      return 2;
    }
    const ha = rest.includes('--ha');
    const why = ha ? haClusterUnavailable() : clusterUnavailable();
    if (why !== undefined) {
      console.error(`cluster: cannot start here: ${why}`);
      return 1;
    }
    console.error(
      ha
        ? 'cluster: starting etcd, 3 PostgreSQL nodes under Patroni (synchronous_mode), pgBackRest, Redis, 3 replicas, HAProxy …'
        : 'cluster: starting PostgreSQL (primary + synchronous standby), Redis, 3 replicas, HAProxy …',
    );
    const cluster = await up({ dir: DIR, port, ha });
    const { state } = cluster;
    console.log(`
Send requests to ${state.url} (HAProxy, deploy/haproxy.cfg), with this token:

  export API=${state.url}/api/1/user TOKEN=${state.token}
  curl -s -X POST "$API/create" -H "Authorization: $TOKEN" -H 'Content-Type: application/json' \\
    -d '{"email":"ada@example.com","password":"a long passphrase","name":"Ada"}'
  curl -s "$API/get?email=ada@example.com" -H "Authorization: $TOKEN"

Console and /docs: http://127.0.0.1:${state.haproxy.internalPort}/console (HAProxy's internal frontend)
Metrics, one replica each (what Prometheus scrapes: docs/deploy.md), with this token:

  export METRICS_TOKEN=${state.serverEnv.METRICS_TOKEN ?? state.metricsToken}
${state.replicas.map((r) => `  curl -s -H "Authorization: Bearer $METRICS_TOKEN" http://127.0.0.1:${r.port}/metrics   # ${r.name}`).join('\n')}
Database: ${state.databaseUrl}${state.ha ? ' (HAProxy: the Patroni leader)' : ''}
Redis:    ${state.redisUrl}
          (both refuse a connection without their password, kept in ${join(state.dir, 'state.json')}, mode 0600)
Logs:     ${join(state.dir, 'logs')}/
Stop:     ./pnpmw cluster down`);
    return 0;
  }
  if (command === 'drill') {
    const why = haClusterUnavailable();
    if (why !== undefined) {
      console.error(`cluster: cannot drill here: ${why}`);
      return 1;
    }
    if (attach(DIR) !== undefined) {
      console.error(
        `cluster: a cluster is kept in ${DIR}; the drill starts its own: run down first, or set CLUSTER_DIR`,
      );
      return 1;
    }
    const result = await drill({ dir: DIR, keep: rest.includes('--keep') });
    // What a cut-off node never answered (a commit waiting there) must not hold the process.
    process.exit(result.failures.length === 0 ? 0 : 1);
  }
  const cluster = attach(DIR);
  if (command === 'down') {
    if (cluster === undefined) {
      console.log(`cluster: nothing kept in ${DIR}; nothing to stop`);
      return 0;
    }
    await cluster.down();
    console.log('cluster: stopped, and its folder removed');
    return 0;
  }
  if (command === 'status') {
    if (cluster === undefined) {
      console.log('cluster: not running');
      return 3;
    }
    const { state } = cluster;
    const balancer = await cluster.balancerStatus().catch(() => ({}) as Record<string, string>);
    console.log(`HAProxy  ${state.url}  ${Object.keys(balancer).length ? 'running' : 'NOT ANSWERING'}`);
    for (const r of state.replicas) console.log(`${r.name}     127.0.0.1:${r.port}  ${balancer[r.name] ?? 'unknown'}`);
    for (const n of state.postgres) console.log(`${n.name}      127.0.0.1:${n.port}  ${n.role}`);
    if (cluster.ha !== undefined) {
      const members = await cluster.ha.members();
      if (members === undefined) console.log('patroni  NO NODE ANSWERS');
      for (const m of members ?? []) {
        const lag =
          m.role === 'leader' ? '' : `  lag ${m.lag ?? 'unknown'}${typeof m.lag === 'number' ? ' bytes' : ''}`;
        console.log(
          `${m.name.padEnd(8)} 127.0.0.1:${m.port}  ${m.role} (${m.state}, timeline ${m.timeline ?? '?'})${lag}`,
        );
      }
      console.log(`etcd     127.0.0.1:${cluster.ha.state.etcd.port}`);
    }
    console.log(`redis    127.0.0.1:${state.redis.port}`);
    return 0;
  }
  if (command === 'backup' || command === 'restore') {
    if (cluster?.ha === undefined) {
      console.error(`cluster: ${command} needs a cluster started with --ha (${DIR})`);
      return 1;
    }
    if (command === 'backup') {
      const type = rest.includes('--incr') ? 'incr' : 'full';
      console.log(
        `cluster: backup ${await cluster.ha.backup(type)} taken (pgBackRest, stanza user-accounts, ${cluster.ha.state.backrest.repo})`,
      );
      return 0;
    }
    const at = rest.indexOf('--to');
    const to = at === -1 ? undefined : new Date(rest[at + 1] ?? '');
    if (to !== undefined && Number.isNaN(to.getTime())) {
      console.error(`cluster: --to takes a time, such as ${new Date().toISOString()}`);
      return 2;
    }
    const name = `restored${cluster.ha.state.restored.length + 1}`;
    const restored = await cluster.ha.restore({ name, ...(to === undefined ? {} : { to }) });
    console.log(`cluster: restored ${to === undefined ? 'to the end of the archive' : `to ${to.toISOString()}`} into ${restored.data}, a fresh node on 127.0.0.1:${restored.port} (standalone, outside Patroni):
  DATABASE_URL=postgres://postgres:<the cluster's password>@127.0.0.1:${restored.port}/postgres`);
    return 0;
  }
  console.error(USAGE);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
