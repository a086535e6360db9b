// A setup file of the system tier (vitest.config.ts): tells scripts/run-tests.ts that the run has
// reached it, by a file in the run's templates folder, so that the system-alone tier starts then.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.TEST_TEMPLATES_DIR;
if (dir) writeFileSync(join(dir, 'system-started'), '');
