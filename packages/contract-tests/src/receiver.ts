// A webhook receiver on 127.0.0.1 that checks every signature with the Standard Webhooks
// library (`standardwebhooks`), not with our code, as a site's receiver would.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChangeEvent } from '@user-accounts/client';
import { Webhook } from 'standardwebhooks';

export interface Received {
  id: string;
  event: ChangeEvent;
}

/** Verifies each delivery and answers 204 (400 when it does not verify, 500 while told to fail); `cleanups` gets its close. */
export async function receiverOn(cleanups: (() => Promise<void>)[]) {
  let secret = '';
  let failing = false;
  const received: Received[] = [];
  let refused = 0;
  let failed = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      if (failing) {
        failed++;
        res.writeHead(500).end();
        return;
      }
      try {
        const event = new Webhook(secret).verify(body, req.headers as IncomingHttpHeaders & Record<string, string>);
        received.push({ id: req.headers['webhook-id'] as string, event: event as ChangeEvent });
        res.writeHead(204).end();
      } catch {
        refused++;
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    setSecret: (s: string) => {
      secret = s;
    },
    fail: (on: boolean) => {
      failing = on;
    },
    counts: () => ({ refused, failed }),
  };
}
