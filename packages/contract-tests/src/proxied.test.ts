// The whole contract suite once more, through `prism proxy` in front of the real server: Prism's
// own check of every answer against the spec must find nothing (see proxiedTarget).
import { defineAccessSuite } from './access-suite.ts';
import { definePasskeysSuite } from './passkeys-suite.ts';
import { defineContractSuite } from './suite.ts';
import { proxiedTarget } from './targets.ts';
import { defineWritesSuite } from './writes-suite.ts';

defineContractSuite(proxiedTarget);
defineAccessSuite(proxiedTarget);
defineWritesSuite(proxiedTarget);
// Prism's check of the WebAuthn options and answers, which a draft-07 engine reads on its own.
definePasskeysSuite(proxiedTarget);
