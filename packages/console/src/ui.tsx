// Pieces every screen uses: how a refusal is shown (the problem's detail, never a stack), and an
// action that says why it is disabled.
import type { Problem } from '@user-accounts/client';
import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';
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
