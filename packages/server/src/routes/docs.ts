// The contract as the server holds it (/openapi.yaml, /openapi.json) and a browsable reference
// (/docs) that works offline: every asset comes from this server, and the page's CSP forbids
// anything else, so no font, script or beacon is fetched from elsewhere.
import { readFileSync } from 'node:fs';
import type { App } from '../context.ts';
import { SCALAR_JS, SPEC_PATH } from '../resources.ts';
import { loadSpec } from '../spec.ts';

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>user-accounts API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="app"></div>
<script src="/docs/scalar.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// Scalar's options: our own spec, no fonts from its CDN, no telemetry, no links out to its services.
const INIT = `Scalar.createApiReference('#app', {
  url: '/openapi.json',
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  mcp: { disabled: true },
});
`;

const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'", // Scalar injects its styles at run time
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
].join('; ');

export function registerDocs(app: App): void {
  let scalar: string | undefined;
  const yaml = () => readFileSync(SPEC_PATH, 'utf8');

  app.get('/openapi.yaml', (c) => c.body(yaml(), 200, { 'Content-Type': 'application/yaml; charset=utf-8' }));
  app.get('/openapi.json', (c) => c.json(loadSpec(), 200));
  app.get('/docs', (c) => c.html(PAGE, 200, { 'Content-Security-Policy': CSP }));
  app.get('/docs/init.js', (c) => c.body(INIT, 200, { 'Content-Type': 'text/javascript; charset=utf-8' }));
  app.get('/docs/scalar.js', (c) => {
    scalar ??= readFileSync(SCALAR_JS, 'utf8');
    return c.body(scalar, 200, {
      'Content-Type': 'text/javascript; charset=utf-8',
      'Cache-Control': 'public, max-age=3600',
    });
  });
}
