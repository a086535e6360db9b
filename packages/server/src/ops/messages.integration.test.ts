// `cli site set`'s senders and `cli template set|list|preview|remove` (issue 60, points 1–2) on a
// migrated database: the transport kept without its password, the password only sealed (bound to
// its site) and never printed; plain SMTP refused but to a loopback host; templates checked when
// set (refused saying which), previewed with sample values, the site's own used over ours.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { rows } from '../db/client.ts';
import { openSenders, sendersOf } from '../messages/senders.ts';
import { templateFor } from '../messages/templates.ts';
import { useCliDatabase } from '../testing/cli-database.ts';
import { inlineSenderSecrets, inlineTemplateFile } from './commands.ts';

const PASSWORD = 'smtp-password-only-the-relay-and-us-know';

describe('cli site set (senders) and cli template', () => {
  const h = useCliDatabase({ prefix: 'senders', files: { password: `${PASSWORD}\n` } });
  const { ring, dir, cli, newSite } = h;
  const passwordFile = h.files.password!;

  it('keeps the mail transport without its password, the password sealed to the site, and prints it nowhere', async () => {
    const site = newSite();
    const argv = inlineSenderSecrets(
      [
        'site',
        'set',
        '--site',
        site,
        '--mail-from',
        'Shop <no-reply@shop.example>',
        '--mail-transport',
        'smtp://mailer@smtp.shop.example:587',
        '--mail-password-file',
        passwordFile,
        '--link-origins',
        'https://shop.example,https://www.shop.example',
      ],
      {},
    );
    const set = await cli(argv);
    expect(set, set.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(set.stdout).toContain(
      `Site ${site}: mail sent through smtp://mailer@smtp.shop.example:587, its password kept sealed.`,
    );
    expect(set.stdout).not.toContain(PASSWORD);
    const [row] = await rows<Record<string, unknown>>(
      h.database.db,
      sql`select * from site_senders where site = ${site}`,
    );
    expect(JSON.stringify(row)).not.toContain(PASSWORD);
    expect(row!.mail_password_sealed).toMatch(/^v1\.k1\./);
    expect(await sendersOf(h.database.db, site)).toMatchObject({
      mailFrom: 'Shop <no-reply@shop.example>',
      mailTransport: 'smtp://mailer@smtp.shop.example:587',
      hasMailPassword: true,
      linkOrigins: ['https://shop.example', 'https://www.shop.example'],
    });
    expect((await openSenders(h.database.db, site, ring))?.mailPassword).toBe(PASSWORD);
    // Copied onto another site's row, it does not open there.
    const other = newSite();
    await cli([
      'site',
      'set',
      '--site',
      other,
      '--mail-from',
      'o@x.example',
      '--mail-transport',
      'smtp://127.0.0.1:2525',
    ]);
    await h.database.db.execute(
      sql`update site_senders set mail_password_sealed = ${row!.mail_password_sealed} where site = ${other}`,
    );
    await expect(openSenders(h.database.db, other, ring)).rejects.toThrow(/does not open/);
    // From the environment when no file is named.
    expect(
      inlineSenderSecrets(['site', 'set', '--site', site, '--mail-transport', 'smtps://h.example'], {
        mailPassword: 'p',
      }),
    ).toContain('--mail-password-inline');
  });

  it('refuses, naming the option, a password in the URL, plain SMTP to a remote host, a bad From, an http link origin', async () => {
    const site = newSite();
    const refused = async (extra: string[], message: string | RegExp) => {
      const out = await cli(['site', 'set', '--site', site, '--mail-from', 'a@shop.example', ...extra]);
      expect(out.code, out.stdout).toBe(2);
      expect(out.stderr.split('\n')[0]).toMatch(message);
    };
    await refused(
      ['--mail-transport', 'smtp://u:secret@smtp.shop.example'],
      /--mail-transport must not hold the password/,
    );
    await refused(
      ['--mail-transport', 'http://smtp.shop.example'],
      /--mail-transport must be smtp:\/\/ \(STARTTLS\) or smtps:\/\//,
    );
    await refused(['--mail-from', 'two@a.example, three@b.example'], /--mail-from must be one address/);
    await refused(['--link-origins', 'http://shop.example'], /--link-origins must be origins/);
    await refused(['--link-origins', 'https://shop.example/reset'], /--link-origins must be origins/);
    await refused(
      ['--sms-transport', 'https://api.sms.example', '--sms-body', '{"to":"{{to}}"}'],
      /--sms-body must be a JSON object with \{\{to\}\} and \{\{text\}\}/,
    );
    await refused(['--sms-countries', 'GBR'], /--sms-countries must be ISO 3166/);
    expect(await sendersOf(h.database.db, site)).toBeUndefined();
    const noFrom = await cli(['site', 'set', '--site', site, '--mail-transport', 'smtp://127.0.0.1:2525']);
    expect(noFrom).toMatchObject({
      code: 1,
      stderr: `Site ${site} needs --mail-from with its mail transport: the address its mail comes from.\n`,
    });
  });

  it('sets a template after checking it, previews it with sample values, and refuses one that breaks a rule, saying which', async () => {
    const site = newSite();
    const file = join(dir, `${site}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        subject: 'Réinitialisez votre mot de passe {{siteName}}',
        text: 'Bonjour {{name}}, {{link}} (expire dans {{expiresIn}})',
        html: '<p>Bonjour {{name}}, <a href="{{link}}">réinitialiser</a></p>',
      }),
    );
    const set = await cli(
      inlineTemplateFile([
        'template',
        'set',
        '--site',
        site,
        '--purpose',
        'reset_password',
        '--lang',
        'fr',
        '--file',
        file,
      ]),
    );
    expect(set, set.stderr).toMatchObject({
      code: 0,
      stdout: `Set the reset_password template of site ${site} in fr.\n`,
    });
    expect((await templateFor(h.database.db, site, 'reset_password', 'fr-CA')).lang).toBe('fr');
    expect((await templateFor(h.database.db, site, 'reset_password', 'de')).lang).toBe('en');
    const list = await cli(['template', 'list', '--site', site]);
    expect(list.stdout).toMatch(/reset_password\s+fr\s+Réinitialisez votre mot de passe \{\{siteName\}\}\s+yes/);
    const preview = await cli(['template', 'preview', '--site', site, '--purpose', 'reset_password', '--lang', 'fr']);
    expect(preview.stdout).toContain(`Subject: Réinitialisez votre mot de passe ${site}`);
    expect(preview.stdout).toContain(
      'Bonjour Ada Lovelace, https://shop.example/reset?ticket=SAMPLE-TICKET (expire dans 1 hour)',
    );
    const ours = await cli(['template', 'preview', '--site', site, '--purpose', 'login_code']);
    expect(ours.stdout).toContain('123456');
    writeFileSync(file, JSON.stringify({ subject: 'Hi {{firstName}}', text: '{{link}}' }));
    const bad = await cli(
      inlineTemplateFile([
        'template',
        'set',
        '--site',
        site,
        '--purpose',
        'reset_password',
        '--lang',
        'fr',
        '--file',
        file,
      ]),
    );
    expect(bad).toMatchObject({ code: 1 });
    expect(bad.stderr).toMatch(/^The reset_password template is refused: subject: unknown variable \{\{firstName\}\}/);
    // The one set before is kept.
    expect((await templateFor(h.database.db, site, 'reset_password', 'fr')).template.subject).toContain(
      'Réinitialisez',
    );
    const removed = await cli(['template', 'remove', '--site', site, '--purpose', 'reset_password', '--lang', 'fr']);
    expect(removed.code).toBe(0);
    expect((await templateFor(h.database.db, site, 'reset_password', 'fr')).lang).toBe('en');
  });
});
