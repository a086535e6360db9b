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
});
