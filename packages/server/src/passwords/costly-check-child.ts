// The process a costly password check runs in (see costly-check.ts): one check at a time, told
// by its parent over IPC, answered with whether the password is right. It holds nothing else and
// ends with its parent.
import { checkPassword } from './foreign.ts';

process.on('message', (message: { stored: string; password: string }) => {
  checkPassword(message.stored, message.password)
    .catch(() => false)
    .then((right) => process.send?.({ right }));
});
// The parent is gone (or closed the channel): nothing is waiting for an answer.
process.on('disconnect', () => process.exit(0));
