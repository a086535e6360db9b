import { describe, expect, it } from 'vitest';
import { topFrames } from './profile.ts';

const frame = (id: number, functionName: string, url = '', lineNumber = 0) => ({
  id,
  callFrame: { functionName, url, lineNumber },
});

describe('topFrames', () => {
  it('ranks frames by self time, leaves idle time out of the shares, and adds up one frame met under two callers', () => {
    const profile = {
      nodes: [
        frame(1, '(root)'),
        frame(2, '(idle)'),
        frame(3, 'parse', 'file:///srv/dist/main.js', 9),
        frame(4, 'parse', 'file:///srv/dist/main.js', 9),
        frame(5, 'write', 'file:///srv/node_modules/.pnpm/pino@9.0.0/node_modules/pino/lib/tools.js', 41),
        frame(6, '(garbage collector)'),
      ],
      startTime: 1000,
      // Each sample lasts until the next: the delta after it (the first delta is before the first sample).
      samples: [2, 3, 4, 5, 6, 2, 3],
      timeDeltas: [0, 500, 10, 20, 15, 5, 500, 10],
    };
    expect(topFrames(profile, 3)).toEqual([
      { frame: 'parse (main.js:10)', share: 40 / 60 },
      { frame: 'write (pino/lib/tools.js:42)', share: 15 / 60 },
      { frame: '(garbage collector)', share: 5 / 60 },
    ]);
  });

  it('counts only the samples taken in the window it is given (the measured load, not the start)', () => {
    const profile = {
      nodes: [frame(1, 'compileSourceTextModule', 'node:internal/modules/esm/utils', 316), frame(2, 'serve')],
      startTime: 1000,
      // Samples at 1000, 1100, 2000, 2100, 2200 µs.
      samples: [1, 1, 2, 2, 1],
      timeDeltas: [0, 100, 900, 100, 100, 100],
    };
    expect(topFrames(profile, 2, { from: 1500, to: 2150 })).toEqual([{ frame: 'serve', share: 1 }]);
    expect(topFrames(profile, 1)[0]?.frame).toBe('compileSourceTextModule (utils:317)');
  });
});
