// Passkeys from a page (issue 29, point 6): register one for a new account, then log in with it
// without naming the account (a discoverable credential). The server makes WebAuthn's JSON
// options and checks the answers; the page hands them to the browser with the platform's own
// JSON helpers (PublicKeyCredential.parseCreationOptionsFromJSON, credential.toJSON()), so no
// WebAuthn library is needed here. The page's origin must be one the site's relying party lists
// (cli site set --site NAME --rp-id localhost --origins http://localhost:PORT).
import type { createClient } from '@user-accounts/client';

type Client = ReturnType<typeof createClient>;
type Json = Record<string, unknown>;

// The JSON helpers of WebAuthn Level 3, in every current browser; TypeScript's DOM types lag.
interface JsonCredentials {
  parseCreationOptionsFromJSON(options: Json): CredentialCreationOptions['publicKey'];
  parseRequestOptionsFromJSON(options: Json): CredentialRequestOptions['publicKey'];
}
const json = PublicKeyCredential as unknown as JsonCredentials;
const toJSON = (credential: Credential | null) => (credential as unknown as { toJSON(): Json }).toJSON();

export async function passkeyFlow(client: Client, say: (line: string) => void): Promise<void> {
  const email = `passkey.${Date.now()}@example.com`;
  const created = await client.POST('/api/1/user/create', {
    body: { email, password: 'a passphrase typed in a browser', name: 'With a passkey' },
  });
  say(`create ${created.response.status} ${created.data?.result.status ?? created.error?.code}`);
  if (!created.data) return;
  const userId = created.data.result._userId;

  // Registration: the server's options, the browser's authenticator, the server's check.
  const options = await client.POST('/api/1/user/factor/passkey/options', { body: { _userId: userId } });
  say(`passkey options ${options.response.status} ${options.error?.code ?? 'ok'}`);
  if (!options.data) return;
  const made = await navigator.credentials.create({
    publicKey: json.parseCreationOptionsFromJSON(options.data.result.options as unknown as Json),
  });
  const registered = await client.POST('/api/1/user/factor/passkey', {
    body: { _userId: userId, label: 'This browser', response: toJSON(made) as never },
  });
  say(`passkey register ${registered.response.status} ${registered.data?.result.status ?? registered.error?.code}`);
  if (!registered.data) return;

  // Login without naming the account: the browser offers the passkey it holds for the site.
  const login = await client.POST('/api/1/user/passkey/options', { body: {} });
  say(`login options ${login.response.status} ${login.error?.code ?? 'ok'}`);
  if (!login.data) return;
  const asserted = await navigator.credentials.get({
    publicKey: json.parseRequestOptionsFromJSON(login.data.result.options as unknown as Json),
  });
  const verified = await client.POST('/api/1/user/passkey/verify', { body: { response: toJSON(asserted) as never } });
  const who = verified.data?.result._userId === userId ? 'the same account' : 'another account';
  say(
    `passkey login ${verified.response.status} ${verified.data ? `${verified.data.result.status}, ${who}` : verified.error?.code}`,
  );
}
