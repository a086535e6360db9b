// "Create a password-reset link": issues a reset_password ticket (POST /api/1/user/ticket) and shows it
// once, in the link the site mails (a template of the site's own page, kept for this tab), with a
// button that copies it. The console sends no mail: the site's page and its mail are the site's.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Action, Alert, describeFailure, formatTime } from '../ui.tsx';

type Issued = components['schemas']['TicketIssued'];

const TEMPLATE = 'user-accounts-console:reset-link-template';
const DEFAULT_TEMPLATE = 'https://your-site.example/reset-password?user={userId}&ticket={ticket}';

const linkFor = (template: string, issued: Issued) =>
  template
    .replaceAll('{ticket}', encodeURIComponent(issued.ticket))
    .replaceAll('{userId}', encodeURIComponent(issued._userId));

export function PasswordReset(props: {
  api: UserAccountsClient;
  userId: string;
  refused: Set<Scope>;
  onIssued: (status: string) => void;
}) {
  const [template, setTemplate] = useState(() => sessionStorage.getItem(TEMPLATE) ?? DEFAULT_TEMPLATE);
  const [issued, setIssued] = useState<Issued>();
  const [failure, setFailure] = useState<string>();
  const [copied, setCopied] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function issue() {
    setBusy(true);
    setFailure(undefined);
    setCopied(undefined);
    try {
      const { data, error } = await props.api.POST('/api/1/user/ticket', {
        body: { _userId: props.userId, purpose: 'reset_password' },
      });
      if (error) setFailure(describeFailure(error));
      else {
        // Without `send` the answer is the ticket's ("ticket issued"): the union narrows on status.
        if (data.result.status === 'ticket issued') setIssued(data.result);
        props.onIssued(data.result.status);
      }
    } catch (error) {
      setFailure(describeFailure(error));
    } finally {
      setBusy(false);
    }
  }

  async function copy(link: string) {
    try {
      await navigator.clipboard.writeText(link);
      setCopied('Copied to the clipboard.');
    } catch {
      setCopied('The browser did not allow copying: select the link and copy it.');
    }
  }

  const link = issued && linkFor(template, issued);
  return (
    <section aria-labelledby="reset-title">
      <h2 id="reset-title">Password reset</h2>
      <div class="field">
        <label for="reset-template">Link template of your site’s reset page</label>
        <input
          id="reset-template"
          class="mono wide"
          value={template}
          aria-describedby="reset-template-hint"
          onInput={(event) => {
            setTemplate(event.currentTarget.value);
            sessionStorage.setItem(TEMPLATE, event.currentTarget.value);
          }}
        />
        <span id="reset-template-hint" class="hint">
          {'{ticket}'} and {'{userId}'} are replaced. The console sends no mail: send the link to the person yourself.
        </span>
      </div>
      <div class="actions">
        <Action scope="write" refused={props.refused} busy={busy} onClick={issue}>
          Create a password-reset link
        </Action>
      </div>
      <Alert message={failure} />
      {issued && link && (
        <section class="ticket" aria-label="The reset link, shown once">
          <p>
            Shown this once: it is not kept anywhere to be shown again. It works once, until{' '}
            {formatTime(issued.expiresAt)}.
          </p>
          <label for="reset-link">Reset link</label>
          <input id="reset-link" class="mono wide" readOnly value={link} onFocus={(e) => e.currentTarget.select()} />
          <div class="actions">
            <button type="button" onClick={() => copy(link)}>
              Copy the link
            </button>
            <button type="button" class="secondary" onClick={() => setIssued(undefined)}>
              Hide it
            </button>
          </div>
          <p role="status">{copied}</p>
        </section>
      )}
    </section>
  );
}
