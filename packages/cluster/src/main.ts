// ./pnpmw cluster up|down|status: the deploy/ topology on this machine (see topology.ts).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { attach, clusterUnavailable, up } from './topology.ts';

const DIR = process.env.CLUSTER_DIR ?? join(fileURLToPath(new URL('../../../', import.meta.url)), '.cluster');
const USAGE = 'usage: ./pnpmw cluster up [--port 8080] | down | status   (kept in .cluster/, or CLUSTER_DIR)';

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'up') {
    const at = rest.indexOf('--port');
    const port = at === -1 ? 8080 : Number(rest[at + 1]);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      console.error(USAGE);
      return 2;
    }
    const why = clusterUnavailable();
    if (why !== undefined) {
      console.error(`cluster: cannot start here: ${why}`);
      return 1;
    }
    console.error('cluster: starting PostgreSQL (primary + synchronous standby), Redis, 3 replicas, HAProxy …');
    const cluster = await up({ dir: DIR, port });
    const { state } = cluster;
    console.log(`
Send requests to ${state.url} (HAProxy, deploy/haproxy.cfg), with this token:

  export API=${state.url}/api/1/user TOKEN=${state.token}
  curl -s -X POST "$API/create" -H "Authorization: $TOKEN" -H 'Content-Type: application/json' \\
    -d '{"email":"ada@example.com","password":"a long passphrase","name":"Ada"}'
  curl -s "$API/get?email=ada@example.com" -H "Authorization: $TOKEN"

Console, /metrics, /docs: http://127.0.0.1:${state.haproxy.internalPort} (HAProxy's internal frontend)
Database: ${state.databaseUrl}
Redis:    ${state.redisUrl}
          (both refuse a connection without their password, kept in ${join(state.dir, 'state.json')}, mode 0600)
Logs:     ${join(state.dir, 'logs')}/
Stop:     ./pnpmw cluster down`);
    return 0;
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
    console.log(`redis    127.0.0.1:${state.redis.port}`);
    return 0;
  }
  console.error(USAGE);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
