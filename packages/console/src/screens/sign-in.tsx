import { useState } from 'preact/hooks';
import { takeSignOutReason } from '../session.ts';
import { Alert } from '../ui.tsx';

export function SignIn({ onSignIn }: { onSignIn: (token: string) => void }) {
  const [reason] = useState(takeSignOutReason);
  const [value, setValue] = useState('');
  return (
    <section class="sign-in">
      <h1 tabIndex={-1}>Accounts console</h1>
      <p>
        Sign in with an API token of your site. It is kept in this tab only, and sent only to this server. An operator
        can make a short-lived one: <code>./pnpmw cli console --site NAME</code>.
      </p>
      <Alert message={reason} />
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (value.trim() !== '') onSignIn(value);
        }}
      >
        <label for="token">API token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          spellcheck={false}
          required
          value={value}
          onInput={(event) => setValue(event.currentTarget.value)}
        />
        <button type="submit">Sign in</button>
      </form>
    </section>
  );
}
