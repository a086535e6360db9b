-- Passkey challenges live 5 minutes and are written by every options call: not worth a WAL flush
-- each. A crash loses only challenges in flight (their ceremonies start again), as with rate_limits.
ALTER TABLE "passkey_challenges" SET UNLOGGED;
