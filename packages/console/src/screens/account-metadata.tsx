// An account's metadata, edited as JSON: checked here (it parses, and is an object) before
// anything is sent, then sent as the JSON merge patch (RFC 7396) `update` takes, computed so that
// the account ends with exactly the object written (a key taken out is sent as null). A 400 shows
// the API's own pointers.
import type { UserAccountsClient } from '@user-accounts/client';
import { useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Action, describeFailure, FieldErrors } from '../ui.tsx';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The merge patch that turns `from` into `to`: removed keys null, objects patched key by key. */
export function mergePatch(from: JsonObject, to: JsonObject): JsonObject {
  const patch: JsonObject = {};
  for (const key of Object.keys(from)) if (!(key in to)) patch[key] = null;
  for (const [key, value] of Object.entries(to)) {
    const before = from[key];
    if (isObject(before) && isObject(value)) {
      const inner = mergePatch(before, value);
      if (Object.keys(inner).length > 0) patch[key] = inner;
    } else if (JSON.stringify(before) !== JSON.stringify(value)) {
      // A null inside a merge patch removes a key, so an object holding nulls cannot be sent as
      // such; the API keeps what it is given otherwise.
      patch[key] = value;
    }
  }
  return patch;
}

/** Why the text cannot be sent, or the object it holds. */
function parse(text: string): { problem: string } | { value: JsonObject } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { problem: `Not JSON: ${(error as Error).message}` };
  }
  if (!isObject(value)) return { problem: 'Metadata must be a JSON object, like {"plan": "pro"}.' };
  return { value: value as JsonObject };
}

export function MetadataEditor(props: {
  api: UserAccountsClient;
  userId: string;
  metadata: Record<string, unknown>;
  refused: Set<Scope>;
  onSaved: (status: string) => void;
}) {
  const shown = JSON.stringify(props.metadata, null, 2);
  const [text, setText] = useState(shown);
  const [problem, setProblem] = useState<string>();
  const [refusal, setRefusal] = useState<unknown>();
  const [busy, setBusy] = useState(false);

  async function save() {
    setRefusal(undefined);
    const parsed = parse(text);
    if ('problem' in parsed) {
      setProblem(parsed.problem);
      return;
    }
    setProblem(undefined);
    const patch = mergePatch(props.metadata as JsonObject, parsed.value);
    if (Object.keys(patch).length === 0) {
      setProblem('Nothing changed: there is nothing to send.');
      return;
    }
    setBusy(true);
    try {
      const { data, error } = await props.api.POST('/api/1/user/update', {
        body: { _userId: props.userId, metadata: patch as Record<string, unknown> },
      });
      if (error !== undefined) setRefusal(error);
      else props.onSaved(data.result.status);
    } catch (error) {
      setRefusal(error);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section aria-labelledby="metadata-title">
      <h2 id="metadata-title">Metadata</h2>
      <label for="metadata-text">Metadata (a JSON object)</label>
      <textarea
        id="metadata-text"
        class="mono"
        rows={Math.min(16, Math.max(4, text.split('\n').length + 1))}
        spellcheck={false}
        value={text}
        aria-invalid={problem !== undefined || refusal !== undefined}
        aria-describedby="metadata-hint"
        onInput={(event) => setText(event.currentTarget.value)}
      />
      <p id="metadata-hint" class={problem ? 'hint invalid' : 'hint'}>
        {problem ?? 'Checked before it is sent. Keys taken out are removed (sent as a JSON merge patch).'}
      </p>
      {refusal !== undefined && (
        <div role="alert" class="alert">
          <p>{describeFailure(refusal)}</p>
          <FieldErrors error={refusal} />
        </div>
      )}
      <div class="actions">
        <Action scope="write" refused={props.refused} busy={busy} onClick={save}>
          Save metadata
        </Action>
        <button type="button" class="secondary" disabled={text === shown} onClick={() => setText(shown)}>
          Undo changes
        </button>
      </div>
    </section>
  );
}
