// Test helper: loggers that write nowhere, or into an array, shaped as the service's are.
import { type Logger, pino } from 'pino';
import { loggerOptions } from '../assemble.ts';

export const silentLogger = (): Logger => pino({ level: 'silent' });

/**
 * A logger whose lines land in `lines`, parsed, shaped and redacted as the service's are. pino
 * writes synchronously to a plain object.
 */
export function arrayLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(loggerOptions('debug'), { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}
