// Create, read, rename and delete an account through the typed client, and show each answer;
// with ?flow=passkey, register a passkey for a new account and log in with it (passkey.ts).
import { createClient } from '@user-accounts/client';
import { passkeyFlow } from './passkey.ts';

const params = new URLSearchParams(location.search);
const client = createClient({
  baseUrl: params.get('api') ?? 'http://127.0.0.1:3000',
  token: params.get('token') ?? '',
});
const log = document.querySelector('#log')!;
const say = (line: string) => {
  log.textContent += `${line}\n`;
};

async function run(): Promise<void> {
  const email = `browser.${Date.now()}@example.com`;
  const created = await client.POST('/api/1/user/create', {
    body: { email, password: 'a passphrase typed in a browser', name: 'From a browser' },
  });
  say(`create ${created.response.status} ${created.data?.result.status ?? created.error?.code}`);
  if (!created.data) return;
  const id = created.data.result._userId;
  const got = await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
  say(`get ${got.response.status} ${got.data?.result.name ?? got.error?.code}`);
  const updated = await client.POST('/api/1/user/update', { body: { _userId: id, name: 'Renamed in a browser' } });
  say(`update ${updated.response.status} ${updated.data?.result.status ?? updated.error?.code}`);
  const again = await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
  say(`get ${again.response.status} ${again.data?.result.name ?? again.error?.code}`);
  const removed = await client.DELETE('/api/1/user/delete', { body: { _userId: id } });
  say(`delete ${removed.response.status} ${removed.data?.result.status ?? removed.error?.code}`);
}

(params.get('flow') === 'passkey' ? passkeyFlow(client, say) : run())
  .catch((error: unknown) => say(`error ${String(error)}`))
  .finally(() => {
    document.body.dataset.done = 'true';
  });
