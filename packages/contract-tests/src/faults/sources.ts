// Clients at different addresses on one machine: each request or connection bound to a loopback
// address of its own (127.0.0.2, 127.0.0.3, … are all this machine on Linux), so that a balancer
// sees an attacker and a victim as different clients. Plus the slow clients of a slowloris.
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface Answer {
  /** 0: no answer (refused, reset, timed out or aborted). */
  status: number;
  code?: string;
  ms: number;
  error?: string;
}

export interface SendOptions {
  /** The client's address (a loopback address other than 127.0.0.1). */
  from: string;
  method?: string;
  token?: string;
  body?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** One request on a connection of its own from `from`; never throws. */
export function send(baseUrl: string, path: string, options: SendOptions): Promise<Answer> {
  const started = Date.now();
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    let done = false;
    const finish = (answer: Omit<Answer, 'ms'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...answer, ms: Date.now() - started });
    };
    const headers: Record<string, string> = {};
    if (options.token !== undefined) headers.Authorization = options.token;
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    const req = request(
      {
        host: hostname,
        port: Number(port),
        path,
        method: options.method ?? 'GET',
        headers,
        localAddress: options.from,
        agent: false,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => {
          let code: string | undefined;
          try {
            code = (JSON.parse(text) as { code?: string }).code;
          } catch {}
          finish({ status: res.statusCode ?? 0, ...(code === undefined ? {} : { code }) });
        });
        res.on('error', (error) => finish({ status: 0, error: error.message }));
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      finish({ status: 0, error: `no answer within ${options.timeoutMs} ms` });
    }, options.timeoutMs);
    const abort = () => {
      req.destroy();
      finish({ status: 0, error: 'aborted' });
    };
    if (options.signal?.aborted) abort();
    options.signal?.addEventListener('abort', abort, { once: true });
    req.on('error', (error) => finish({ status: 0, error: error.message }));
    req.end(options.body);
  });
}

export interface SlowClients {
  /** Connections opened, and how those ended that the server (or balancer) ended. */
  readonly opened: number;
  /** Answered with this status before the client was done sending (e.g. 408 from a balancer). */
  readonly answered: Map<number, number>;
  /** Closed by the other side without an answer, within 1 s of being opened (refused at once). */
  readonly refused: number;
  stop(): void;
}

/**
 * `count` connections from `from`, each sending `head` (a request's first lines, without the
 * blank line unless it is meant to be sent) one byte every `everyMs`, then `body` the same way:
 * the slow client of a slowloris. A connection the other side closes is opened again after
 * `reopenMs`, until stop().
 */
export function slowClients(
  baseUrl: string,
  options: { from: string; count: number; head: string; body?: string; everyMs: number; reopenMs: number },
): SlowClients {
  const { hostname, port } = new URL(baseUrl);
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const state = { opened: 0, answered: new Map<number, number>(), refused: 0 };
  const open = () => {
    if (stopped) return;
    state.opened += 1;
    const openedAt = Date.now();
    const socket = connect({ host: hostname, port: Number(port), localAddress: options.from });
    sockets.add(socket);
    const payload = `${options.head}${options.body ?? ''}`;
    let sent = 0;
    let tick: NodeJS.Timeout | undefined;
    let answer = '';
    socket.on('connect', () => {
      // A slow body: its head at once, then the body a byte at a time. Slow headers: 16 bytes, then a byte at a time.
      const fast = options.body === undefined ? Math.min(16, payload.length) : options.head.length;
      socket.write(payload.slice(0, fast));
      sent = fast;
      tick = setInterval(() => {
        if (sent < payload.length) socket.write(payload[sent++]!);
      }, options.everyMs);
      timers.add(tick);
    });
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      if (tick) {
        clearInterval(tick);
        timers.delete(tick);
      }
      if (stopped) return;
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
      if (status !== undefined) state.answered.set(Number(status), (state.answered.get(Number(status)) ?? 0) + 1);
      else if (Date.now() - openedAt < 1_000) state.refused += 1;
      const again = setTimeout(() => {
        timers.delete(again);
        open();
      }, options.reopenMs);
      timers.add(again);
    });
  };
  for (let i = 0; i < options.count; i++) open();
  return {
    get opened() {
      return state.opened;
    },
    answered: state.answered,
    get refused() {
      return state.refused;
    },
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
    },
  };
}
