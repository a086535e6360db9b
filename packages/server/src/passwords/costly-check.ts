// The costly lane's password checks (passwords/hasher.ts), each in a process of its own that is
// killed when the check's request is gone (its deadline passed, or the client left): a check of
// an imported hash can take seconds of a core, and the libraries that compute it (@node-rs/bcrypt
// and node:crypto's PBKDF2 and scrypt on libuv's thread pool, argon2 in native code) cannot be
// stopped once they run, nor can a worker thread stop native code. A process can: SIGKILL frees
// its core at once. Node's own child_process does it; no library (a pool of killable processes is
// these few lines, with the lane in front of it bounding how many run).
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// From the sources, the child's module beside this one; from the bundle (build.ts), its entry.
const CHILD = fileURLToPath(
  import.meta.url.endsWith('.ts')
    ? new URL('./costly-check-child.ts', import.meta.url)
    : new URL('./costly-check.js', import.meta.url),
);

export interface CostlyChecker {
  /**
   * Whether `password` matches `stored`, checked in a process of its own. When `signal` aborts
   * first, the process is killed and the check rejects with the signal's reason.
   */
  check(stored: string, password: string, signal?: AbortSignal): Promise<boolean>;
  /** Ends the idle processes (a busy one ends with its check). */
  close(): void;
  /** Processes alive now, busy or idle. */
  readonly processes: number;
}

export function createCostlyChecker(options: {
  /** Idle processes kept for the next checks (the lane's slots): a start costs ~0.1 s of a core. */
  maxIdle: number;
  /** The error when a process ends without an answer (not for an abort). */
  failed: () => Error;
}): CostlyChecker {
  const idle: ChildProcess[] = [];
  let alive = 0;
  const start = () => {
    const child = fork(CHILD, [], {
      execArgv: [],
      serialization: 'json',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    alive++;
    let counted = false;
    // A fork that failed (EMFILE, EAGAIN) or a send on a closed channel is an 'error' event: with
    // no listener it would end the server. A process that never started has no exit to count.
    child.on('error', () => {
      if (child.pid === undefined && !counted) {
        counted = true;
        alive--;
      }
    });
    child.once('exit', () => {
      if (counted) return;
      counted = true;
      alive--;
      const at = idle.indexOf(child);
      if (at >= 0) idle.splice(at, 1);
    });
    return child;
  };
  // An idle process keeps neither the server nor a CLI run alive.
  const park = (child: ChildProcess) => {
    if (idle.length < options.maxIdle && child.connected) {
      child.unref();
      child.channel?.unref();
      idle.push(child);
    } else {
      child.kill('SIGKILL');
    }
  };
  return {
    check(stored, password, signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      const child = idle.pop() ?? start();
      child.ref();
      child.channel?.ref();
      return new Promise<boolean>((resolve, reject) => {
        const settle = () => {
          child.off('message', answered);
          child.off('exit', ended);
          child.off('error', broke);
          signal?.removeEventListener('abort', aborted);
        };
        const answered = (message: { right?: unknown }) => {
          settle();
          park(child);
          resolve(message.right === true);
        };
        const ended = () => {
          settle();
          reject(options.failed());
        };
        const broke = () => {
          settle();
          child.kill('SIGKILL');
          reject(options.failed());
        };
        const aborted = () => {
          settle();
          child.kill('SIGKILL');
          reject(signal!.reason);
        };
        child.on('message', answered);
        child.once('exit', ended);
        child.once('error', broke);
        signal?.addEventListener('abort', aborted, { once: true });
        child.send({ stored, password }, (error) => {
          if (error !== null && error !== undefined) broke();
        });
      });
    },
    close() {
      for (const child of idle.splice(0)) child.kill('SIGKILL');
    },
    get processes() {
      return alive;
    },
  };
}
