// What one operation of the API is: a row of the table in operations.ts. Each handler file
// exports its row; the server, the mock's gate, the fuzz oracle and the security suite read them.
import type { Context } from 'hono';
import type { Scope } from '../auth/tokens.ts';
import type { BodySchema } from '../contract/validation.ts';
import type { WriteOperation } from '../kernel/audit.ts';
import type { Budget } from '../limits/rate-limit.ts';
import type { Answer, AppEnv, OpContext, ParseContext } from './context.ts';

export type Method = 'GET' | 'POST' | 'DELETE';

export interface Operation<Input = unknown> {
  /** The operationId in the spec. */
  name: string;
  method: Method;
  path: string;
  /** The scope a token needs; several: any one of them (the spec's security requirements, in their order). */
  scope: Scope | readonly Scope[];
  /**
   * Another scope that admits some bodies (the spec's second security requirement, its
   * description saying which): a token without `scope` but with `alsoScope.scope` passes when
   * `admits(body)` (the body as parsed, before the schema: a `login` ticket's issue and redeem
   * take the verify scope). Checked after the body is read; a token with neither, before it.
   */
  alsoScope?: { scope: Scope; admits(body: unknown): boolean };
  /** Where the input comes from: the query (checked by the spec's parameters) or a JSON body of this schema. */
  request: { query: true } | { body: BodySchema };
  /** A budget counted on top of "all" (see rate-limit.ts). */
  budget?: Budget;
  /** Takes an Idempotency-Key. */
  idempotent?: boolean;
  /**
   * Wider bounds than every other operation's, for one that carries many accounts at once
   * (import): its body, its answer kept for an Idempotency-Key, and its time before a 503.
   */
  bulk?: { bodyBytes: number; keptAnswerBytes: number; timeoutMs: number };
  /** How long it may wait for something to happen (a long-poll), on top of the request timeout. */
  waitsMs?: number;
  /** The audited write it is, when it writes (its success goes through runWrite). */
  writes?: WriteOperation;
  /**
   * Refusals of the write, by problem code, that write no audit row: a miss anyone with the
   * scope can provoke at will with made-up input (session/refresh's unknown token), whose row
   * would let a caller turn garbage into database writes, and which names no account. A refusal
   * the write itself records in its transaction (a replayed session token's revocation) keeps it.
   */
  unaudited?: readonly string[];
  /**
   * Reads and checks the request as the spec says, with no data: the schema and the rules the
   * spec states in words. The mock's gate runs it too, so both refuse the same requests alike.
   * It may normalize the parsed query or body in place (trimming); the mock forwards them so.
   */
  parse(c: ParseContext): Input;
  /**
   * The mock's own answer where none of Prism's examples can be right (import's rows refused
   * one by one); undefined leaves the answer to Prism.
   */
  mockAnswer?(c: Context<AppEnv>, input: Input): Response | undefined;
  /**
   * The name of the documented example of the success that fits this request, when the caller's
   * `Prefer` names none (a ticket's purpose: a verify_email redeem is not answered "password reset").
   */
  mockExample?(input: Input): string | undefined;
  /** Does the work and answers. */
  handle(c: OpContext, input: Input): Promise<Answer>;
}

/** A row of the table, its input type checked between `parse` and `handle`. */
export const defineOperation = <Input>(operation: Operation<Input>): Operation<Input> => operation;
