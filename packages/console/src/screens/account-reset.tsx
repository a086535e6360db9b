// "Create a password-reset link": issues a reset_password ticket (POST /api/1/user/ticket) and shows it
// once, in the link the site mails (a template of the site's own page, kept for this tab), with a
// button that copies it. "Email it to the person" (issue 60, point 7) issues it with `send`: the
// service mails the same link from the site's sender (`cli site set --mail-transport`), the console
// never sees the ticket, and a site without a sender is told so (409 no_transport).
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Action, Alert, describeFailure, formatTime } from '../ui.tsx';

type Issued = components['schemas']['TicketIssued'];
type Sent = components['schemas']['TicketSent'];

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
  const [sent, setSent] = useState<Sent>();
  const [failure, setFailure] = useState<string>();
  const [copied, setCopied] = useState<string>();
  const [busy, setBusy] = useState(false);

  async function issue() {
    setBusy(true);
    setFailure(undefined);
    setCopied(undefined);
    setSent(undefined);
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

  /** The same link, mailed by the service: the template's {userId} filled here, its {ticket} by the server. */
  async function send() {
    setBusy(true);
    setFailure(undefined);
    setIssued(undefined);
    setSent(undefined);
    try {
      const { data, error } = await props.api.POST('/api/1/user/ticket', {
        body: {
          _userId: props.userId,
          purpose: 'reset_password',
          send: { channel: 'email', linkTemplate: template.replaceAll('{userId}', encodeURIComponent(props.userId)) },
        },
      });
      if (error) setFailure(describeFailure(error));
      else {
        if (data.result.status === 'ticket sent') setSent(data.result);
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
          {'{ticket}'} and {'{userId}'} are replaced. Email it from your site's sender, or create the link and send it
          yourself.
        </span>
      </div>
      <div class="actions">
        <Action scope="write" refused={props.refused} busy={busy} onClick={send}>
          Email it to the person
        </Action>
        <Action scope="write" refused={props.refused} busy={busy} onClick={issue}>
          Create a password-reset link
        </Action>
      </div>
      <Alert message={failure} />
      {sent && (
        <p role="status">
          Queued to be mailed: message {sent.messageId}. The link works once, until {formatTime(sent.expiresAt)}.
        </p>
      )}
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
