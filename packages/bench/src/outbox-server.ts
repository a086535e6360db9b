// The server as main.ts runs it, with its change events (`with-outbox`) or without them
// (`without-outbox`): what the outbox costs a write is measured between the two (events.ts). Writes
// without events are no configuration of the production server, only this entry's argument.
import { main } from '@user-accounts/server/main';

await main({ outbox: process.argv[2] !== 'without-outbox' });
