// Every relative link of README.md and docs/*.md leads somewhere (issue 46, point 3): the file
// exists, and an #anchor is a heading of that file (GitHub's slugs) or an id it declares. A link
// in a code block is code, not a link; an address with a scheme is not ours to check here.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs')).flatMap((f) => (f.endsWith('.md') ? [`docs/${f}`] : [])),
];

/** The text outside fenced code blocks. */
const unfenced = (markdown: string) => markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '');
/** The text outside code, fenced or inline. */
const prose = (markdown: string) => unfenced(markdown).replace(/`[^`\n]*`/g, (code) => ' '.repeat(code.length));

/** GitHub's anchors of a page: each heading's slug (repeats get -1, -2 …), and ids in HTML. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading] of unfenced(markdown).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const text = heading!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/[*_~]/g, (c) => (c === '_' ? '_' : ''));
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  for (const [, id] of markdown.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(id!);
  return found;
}

/** Each link's target as written: inline links and reference definitions. */
function links(markdown: string): string[] {
  const text = prose(markdown);
  const inline = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const references = [...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!);
  return [...inline, ...references];
}

describe('the relative links of README.md and docs/*.md', () => {
  it.each(PAGES)('%s: every link resolves, file and anchor', (page) => {
    const markdown = readFileSync(join(ROOT, page), 'utf8');
    const broken: string[] = [];
    for (const target of links(markdown)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(ROOT, page) : join(dirname(join(ROOT, page)), decodeURIComponent(path));
      if (!existsSync(file)) {
        broken.push(`${target}: no ${relative(ROOT, file)}`);
        continue;
      }
      if (anchor === undefined || anchor === '' || statSync(file).isDirectory() || !file.endsWith('.md')) continue;
      if (!anchors(readFileSync(file, 'utf8')).has(decodeURIComponent(anchor).toLowerCase())) {
        broken.push(`${target}: no heading "#${anchor}" in ${relative(ROOT, file)}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('finds the links it checks (a page of links, a heading with punctuation)', () => {
    expect(links('See [a](b.md#c) and `[no](x.md)`.\n```\n[no](y.md)\n```\n[d]: e.md')).toEqual(['b.md#c', 'e.md']);
    expect([...anchors('# The operators’ address: /metrics, `/console`\n## Twice\n## Twice')]).toEqual([
      'the-operators-address-metrics-console',
      'twice',
      'twice-1',
    ]);
  });
});

describe('the deploy guide says what an operator needs (issue 46, point 3)', () => {
  const guide = readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8');
  const section = (title: string) => {
    const start = guide.indexOf(`\n## ${title}\n`);
    expect(start, `docs/deploy.md has "## ${title}"`).toBeGreaterThan(0);
    const end = guide.indexOf('\n## ', start + 1);
    return guide.slice(start, end < 0 ? undefined : end);
  };
  it('FACTOR_ENCRYPTION_KEY: set, what it seals (the signing keys too), kept with the backups', () => {
    expect(guide).toMatch(/FACTOR_ENCRYPTION_KEY=\$\(\/opt\/user-accounts\/bin\/user-accounts cli key generate\)/);
    // No openssl on a minimal host (issue 64): the CLI makes the key.
    expect(guide).not.toMatch(/openssl rand/);
    expect(section("The deployment's key: FACTOR_ENCRYPTION_KEY")).toMatch(/signing\s+keys/);
    expect(section('Backups')).toMatch(/FACTOR_ENCRYPTION_KEY/);
    const env = readFileSync(join(ROOT, 'deploy/user-accounts.env'), 'utf8');
    expect(env).toMatch(/^#FACTOR_ENCRYPTION_KEY=/m);
    expect(env).toMatch(/BACK IT UP/);
  });
  it('HAProxy on Debian step by step, unprivileged; metrics per replica; backup and restore commands (issue 64, point 4)', () => {
    const haproxy = section('Install, step by step (systemd, three replicas behind HAProxy)');
    expect(haproxy).toContain('### HAProxy on Debian, step by step');
    for (const step of [
      'apt-get install -y haproxy',
      'install -m 0644 /opt/user-accounts/deploy/haproxy.cfg /etc/haproxy/haproxy.cfg',
      'cp -r /opt/user-accounts/deploy/haproxy-errors /etc/haproxy/',
      '/etc/default/haproxy',
      'UA_APP1=',
      'UA_BIND=',
      'haproxy -c -f /etc/haproxy/haproxy.cfg',
      'systemctl restart haproxy',
    ])
      expect(haproxy, step).toContain(step);
    const config = readFileSync(join(ROOT, 'deploy/haproxy.cfg'), 'utf8');
    expect(config).toMatch(
      /^ {2}\.if !defined\(UA_RUN_AS_INVOKER\)\n {4}user haproxy\n {4}group haproxy\n {4}chroot \/var\/lib\/haproxy\n {2}\.endif$/m,
    );
    // The prerequisites named: curl for the checks, and nothing else.
    expect(haproxy).toMatch(/apt-get install -y curl/);
    const operators = section("The operators' address: /metrics, /console, /docs");
    expect(operators).toMatch(
      /scrape_configs:[\s\S]*targets: \["10\.0\.0\.11:3001", "10\.0\.0\.12:3001", "10\.0\.0\.13:3001"\]/,
    );
    expect(operators).toContain('REPLICA_NAME');
    const backups = section('Backups');
    for (const command of ['pg_dump --format=custom', 'pg_restore', 'cli migrate'])
      expect(backups, command).toContain(command);
  });
  it("Node for a source install, the database's sslmode, log shipping", () => {
    expect(section('Node.js')).toMatch(/24\.18/);
    expect(section('The database connection: sslmode')).toMatch(/sslmode=verify-full/);
    expect(section('Logs')).toMatch(/journal/);
  });
});

describe('the login guide names what a site sets for its second factors (issue 64, point 6)', () => {
  const guide = readFileSync(join(ROOT, 'docs/login.md'), 'utf8');
  const factors = guide.slice(guide.indexOf('\n## Second factors'), guide.indexOf('\n## Passkeys'));
  it("the TOTP issuer: the site's display name, and the option that sets it", () => {
    expect(factors).toMatch(/issuer: the\s+site's display name/);
    expect(factors).toContain('cli site set --site NAME --display-name');
  });
  it('a replayed code: said to be already used', () => {
    expect(factors).toMatch(/replay is 422 `invalid_code` whose `detail` says the code was already used/);
  });
});
