import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DRILL_TIMINGS, type HaNode, type HaState, type PatroniYaml, patroniConfig } from './patroni.ts';
import { DEPLOY } from './topology.ts';

const shipped = (name: string) => parse(readFileSync(join(DEPLOY, 'patroni', `${name}.yml`), 'utf8')) as PatroniYaml;

/** deploy/postgresql/primary.conf's `key = value` lines. */
function primaryConf(): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const line of readFileSync(join(DEPLOY, 'postgresql', 'primary.conf'), 'utf8').split('\n')) {
    const match = /^([a-z_]+)\s*=\s*'?([^'#]*?)'?\s*(#.*)?$/.exec(line.trim());
    if (match) settings[match[1]!] = match[2]!;
  }
  return settings;
}

describe('deploy/patroni', () => {
  it('pg2.yml and pg3.yml are pg1.yml but for the name and the addresses', () => {
    const one = JSON.stringify(shipped('pg1'));
    for (const n of [2, 3]) {
      expect(JSON.stringify(shipped(`pg${n}`))).toBe(
        one.replace('"name":"pg1"', `"name":"pg${n}"`).replaceAll('db1.internal', `db${n}.internal`),
      );
    }
  });

  it("carries deploy/postgresql/primary.conf's settings, synchronous_mode on, and etcd's v2 API", () => {
    const config = shipped('pg1');
    const parameters = config.bootstrap.dcs.postgresql.parameters as Record<string, string | number>;
    const primary = primaryConf();
    expect(Object.keys(primary).length).toBeGreaterThan(5);
    for (const [key, value] of Object.entries(primary)) {
      // Patroni names the synchronous standby itself (synchronous_mode).
      if (key === 'synchronous_standby_names') continue;
      expect(String(parameters[key]), key).toBe(value);
    }
    expect(config.bootstrap.dcs.synchronous_mode).toBe(true);
    expect(config.bootstrap.dcs.postgresql.use_pg_rewind).toBe(true);
    expect(config.etcd.hosts).toMatch(/etcd1/);
    expect(config.etcd3).toBeUndefined();
    const { ttl, loop_wait, retry_timeout } = config.bootstrap.dcs;
    expect(loop_wait + 2 * retry_timeout).toBeLessThanOrEqual(ttl);
    expect(DRILL_TIMINGS.loop_wait + 2 * DRILL_TIMINGS.retry_timeout).toBeLessThanOrEqual(DRILL_TIMINGS.ttl);
  });

  it("cluster up --ha runs the shipped file with this machine's addresses, folders and timings only", () => {
    const node: HaNode = { name: 'pg2', data: '/tmp/x/pg2', port: 6002, apiPort: 7002, pid: 0, config: '/tmp/x/p.yml' };
    const state = {
      timings: DRILL_TIMINGS,
      etcd: { port: 2379, peerPort: 2380, pid: 0, data: '/tmp/x/etcd' },
      backrest: { config: '/tmp/x/pgbackrest.conf', repo: '/tmp/x/backups' },
    } as HaState;
    const config = patroniConfig(DEPLOY, '/tmp/x', state, node);
    expect(config.name).toBe('pg2');
    expect(config.postgresql.listen).toBe('127.0.0.1:6002');
    expect(config.restapi.listen).toBe('127.0.0.1:7002');
    expect(config.etcd).toEqual({ hosts: '127.0.0.1:2379' });
    expect(config.bootstrap.dcs).toMatchObject({ ...DRILL_TIMINGS, synchronous_mode: true });
    expect(config.postgresql.parameters.archive_command).toContain('--pg1-path=/tmp/x/pg2 archive-push %p');
    // No password in the file: they come in PATRONI_* variables.
    expect(JSON.stringify(config)).not.toMatch(/"password":"(?!set-in-env\.conf)/);
  });
});
