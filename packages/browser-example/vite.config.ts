import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The page imports the client as it is published: its built ESM (packages/client/dist), not its source.
export default defineConfig({
  resolve: {
    alias: { '@user-accounts/client': fileURLToPath(new URL('../client/dist/index.js', import.meta.url)) },
  },
  build: { target: 'es2022' },
  logLevel: 'warn',
});
