// The run's build (testing/build.ts, started by scripts/test-templates.ts): a run that ends before
// the build does (one quick file) stops it, esbuild's service with it, and removes its folder; and
// the run still ends well.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SETUP = fileURLToPath(new URL('../../../../scripts/test-templates.ts', import.meta.url));

describe("the run's server build", () => {
  it('a run that ends while esbuild bundles stops the build and esbuild, removes its folder, and exits 0', () => {
    // The global setup, then its teardown while esbuild bundles, as a run of one unit file does,
    // in a process of its own without this run's variables. esbuild bundles in a process of its
    // own (its service, the build's child): left running, it wrote the bundle into the removed
    // folder (20 MB a run, left in the checkout), and a killed build's exit wrote `status` there
    // (ENOENT, the run's exit code 1 with every test passed).
    const script = `
      import { existsSync, readdirSync, readFileSync } from 'node:fs';
      const { default: setup } = await import(${JSON.stringify(SETUP)});
      const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
      const stat = (pid) => { try { return readFileSync('/proc/' + pid + '/stat', 'utf8'); } catch { return undefined; } };
      // This process's descendants, with their command lines.
      const descendants = () => {
        const parent = new Map();
        for (const pid of readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) {
          const s = stat(pid);
          if (s) parent.set(pid, s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
        }
        const out = [];
        const walk = (pid) => { for (const [p, pp] of parent) if (pp === pid) { out.push(p); walk(p); } };
        walk(String(process.pid));
        return out.map((pid) => {
          let cmd = '';
          try { cmd = readFileSync('/proc/' + pid + '/cmdline', 'utf8'); } catch {}
          return { pid, cmd };
        });
      };
      const teardown = setup();
      const dir = process.env.TEST_SERVER_BUILD;
      let started = [];
      for (let i = 0; i < 1200 && !started.some((p) => p.cmd.includes('esbuild')); i++) {
        await pause(25);
        started = descendants();
      }
      await teardown();
      await pause(500);
      const running = started.filter(({ pid }) => { const s = stat(pid); return s && !/^\\S+ \\(.*\\) Z/.test(s); });
      console.log(JSON.stringify({ dir, started: started.map((p) => p.cmd.split('\\0').slice(0, 2).join(' ')), running: running.map((p) => p.cmd.split('\\0')[0]), there: existsSync(dir) }));
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.stderr).not.toMatch(/ENOENT/);
    expect(run.status, run.stderr).toBe(0);
    const { dir, started, running, there } = JSON.parse(run.stdout) as {
      dir: string;
      started: string[];
      running: string[];
      there: boolean;
    };
    expect(dir).toMatch(/\.test-build\/run-/);
    expect(
      started.some((cmd) => cmd.includes('esbuild')),
      started.join('\n'),
    ).toBe(true);
    expect(running).toEqual([]);
    expect(there).toBe(false);
    expect(existsSync(dir)).toBe(false);
  });
});
