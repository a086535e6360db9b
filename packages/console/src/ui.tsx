// Pieces every screen uses: how a refusal is shown (the problem's detail, never a stack), and an
// action that says why it is disabled.
import type { Problem } from '@user-accounts/client';
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import type { Scope } from './session.ts';

/** What a failed call says to a person: the problem's detail, or why there was no answer. */
export function describeFailure(error: unknown): string {
  const problem = error as Partial<Problem> | undefined;
  if (problem && typeof problem.detail === 'string') return problem.detail;
  if (error instanceof Error) return `The server could not be reached (${error.message}).`;
  return 'The server answered with an error.';
}

export function Alert({ message }: { message: string | undefined }) {
  if (message === undefined) return null;
  return (
    <p role="alert" class="alert">
      {message}
    </p>
  );
}

const NEEDS: Record<Scope, string> = {
  read: 'Needs the read scope, which this token lacks.',
  write: 'Needs the write scope, which this token lacks.',
  events: 'Needs the events scope, which this token lacks.',
  impersonate: 'Needs the impersonate scope, which only an operator grants (cli token create --scopes impersonate).',
};

/** A button that, when the token lacks its scope, is disabled and says so beside itself. */
export function Action(props: {
  scope: Scope;
  refused: Set<Scope>;
  onClick: () => void;
  busy?: boolean;
  danger?: boolean;
  children: ComponentChildren;
}) {
  const reasonId = useId();
  const lacking = props.refused.has(props.scope);
  return (
    <span class="action">
      <button
        type="button"
        class={props.danger ? 'danger' : undefined}
        disabled={lacking || props.busy}
        aria-describedby={lacking ? reasonId : undefined}
        onClick={props.onClick}
      >
        {props.children}
      </button>
      {lacking && (
        <span id={reasonId} class="reason">
          {NEEDS[props.scope]}
        </span>
      )}
    </span>
  );
}

export function Lacking({ scope, refused }: { scope: Scope; refused: Set<Scope> }) {
  if (!refused.has(scope)) return null;
  return (
    <p role="status" class="reason">
      {NEEDS[scope]}
    </p>
  );
}

export const formatTime = (iso: string): string => new Date(iso).toLocaleString();

/** The pointers of a 400's `errors` (where in the request, and what is wrong there), one a line. */
export function FieldErrors({ error }: { error: unknown }) {
  const errors = (error as Partial<Problem> | undefined)?.errors;
  if (!errors || errors.length === 0) return null;
  return (
    <ul class="field-errors" aria-label="What the API found wrong">
      {errors.map((e) => (
        <li key={e.pointer + e.code}>
          <code>{e.pointer || '(the whole body)'}</code>: {e.message} ({e.code})
        </li>
      ))}
    </ul>
  );
}

/**
 * A confirmation for a destructive action: a modal dialog (focus inside it, Escape cancels) that
 * names what will happen. `open` is driven by the caller; the confirm button runs `onConfirm`.
 */
export function Confirm(props: {
  open: boolean;
  title: string;
  confirmLabel: string;
  cancelLabel?: string;
  onConfirm: () => void;
  onCancel: () => void;
  children: ComponentChildren;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const textId = useId();
  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (props.open && !element.open) element.showModal();
    if (!props.open && element.open) element.close();
  }, [props.open]);
  return (
    <dialog ref={dialog} aria-labelledby={titleId} aria-describedby={textId} onClose={props.onCancel}>
      <h2 id={titleId}>{props.title}</h2>
      <div id={textId}>{props.children}</div>
      <div class="actions">
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
        <button type="button" onClick={props.onCancel}>
          {props.cancelLabel ?? 'Cancel'}
        </button>
      </div>
    </dialog>
  );
}
