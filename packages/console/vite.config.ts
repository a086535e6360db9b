import { defineConfig } from 'vite';

// Served by the server under /console (packages/server/src/http/routes/console.ts), so every asset
// is asked for under /console/assets/: one origin, which the page's CSP is limited to.
export default defineConfig({
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { target: 'es2022', outDir: 'dist', emptyOutDir: true, reportCompressedSize: false },
  logLevel: 'warn',
});
