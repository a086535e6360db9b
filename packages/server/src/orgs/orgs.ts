// Organizations (issue 45, point 1): create, read, change, delete, list. Every lookup names the
// site: another site's organization answers as one that does not exist.
import { and, asc, desc, eq, type SQL, sql } from 'drizzle-orm';
import { type Metadata, mergedMetadata, sizeFault } from '../accounts/metadata.ts';
import type { Db } from '../db/client.ts';
import { orgs } from '../db/schema.ts';
import { invalidRequest, sqlState } from '../errors.ts';
import { isUuid, uuidv7 } from '../kernel/ids.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type KeptAnswer, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { type OrgRow, orgNotFound, slugTaken } from './rules.ts';

const orgColumns = {
  id: orgs.id,
  name: orgs.name,
  slug: orgs.slug,
  metadata: orgs.metadata,
  memberCount: orgs.memberCount,
  createdAt: orgs.createdAt,
  updatedAt: orgs.updatedAt,
};

/** An org.* event about the organization: its id, name and slug (never its metadata). */
export const orgEvent = (
  type: EventEntry['type'],
  row: { id: string; name: string; slug: string | null },
): EventEntry => ({
  type,
  userId: row.id,
  data: { orgId: row.id, name: row.name, slug: row.slug },
});

/** A unique violation of the site's slugs as 409 slug_taken; anything else as it is. */
function slugCollision(error: unknown): never {
  if (sqlState(error) === '23505') throw slugTaken();
  throw error;
}

export async function createOrg(
  scope: WriteScope,
  deps: WriteDeps,
  input: { name: string; slug?: string | undefined; metadata?: Metadata | undefined },
  answer?: (id: string) => KeptAnswer,
): Promise<string> {
  const id = uuidv7();
  const row = { id, name: input.name, slug: input.slug ?? null };
  const done = {
    userId: undefined,
    status: 201,
    outcome: 'organization created',
    moreEvents: [orgEvent('org.created', row)],
    // Kept for the caller's Idempotency-Key in the write's own transaction (a retry replays it).
    ...(answer && { answer: answer(id) }),
  };
  await inWrite(scope, deps, 'org_create', done, async (tx) => {
    await tx
      .insert(orgs)
      .values({ ...row, site: scope.site, metadata: input.metadata ?? {} })
      .catch(slugCollision);
    return true;
  });
  return id;
}

/** The site's organization by id or slug; 404 org_not_found when the site has none. */
export async function getOrg(db: Db, site: string, by: { orgId?: string; slug?: string }): Promise<OrgRow> {
  if (by.orgId !== undefined && !isUuid(by.orgId)) throw orgNotFound();
  const which = by.orgId !== undefined ? eq(orgs.id, by.orgId) : eq(orgs.slug, by.slug!);
  const [row] = await db
    .select(orgColumns)
    .from(orgs)
    .where(and(which, eq(orgs.site, site)));
  if (row === undefined) throw orgNotFound();
  return row;
}

export async function updateOrg(
  scope: WriteScope,
  deps: WriteDeps,
  input: {
    orgId: string;
    name?: string | undefined;
    slug?: string | null | undefined;
    metadata?: Metadata | undefined;
  },
): Promise<void> {
  if (!isUuid(input.orgId)) throw orgNotFound();
  type Written = { id: string; name: string; slug: string | null };
  const done = (row: Written) => ({
    userId: undefined,
    status: 200,
    outcome: 'organization updated',
    moreEvents: [orgEvent('org.updated', row)],
  });
  const written = await inWrite(scope, deps, 'org_update', done, async (tx) => {
    const set: Record<string, unknown> = { updatedAt: sql`now()` };
    if (input.name !== undefined) set.name = input.name;
    if (input.slug !== undefined) set.slug = input.slug;
    if (input.metadata !== undefined) set.metadata = mergedMetadata(input.metadata, sql`${orgs.metadata}`);
    const [row] = await tx
      .update(orgs)
      .set(set)
      .where(and(eq(orgs.id, input.orgId), eq(orgs.site, scope.site)))
      .returning({ id: orgs.id, name: orgs.name, slug: orgs.slug, metadata: orgs.metadata })
      .catch(slugCollision);
    if (row === undefined) return undefined;
    // The merge may leave more than a metadata's bound: refused, and rolled back.
    const tooLarge = sizeFault(row.metadata, '/metadata');
    if (tooLarge !== undefined) throw invalidRequest('The merged metadata would be too large.', [tooLarge]);
    return row;
  });
  if (written === undefined) throw orgNotFound();
}

/** Deletes the organization, its memberships and its invitations (their foreign keys' cascade). */
export async function deleteOrg(scope: WriteScope, deps: WriteDeps, orgId: string): Promise<void> {
  if (!isUuid(orgId)) throw orgNotFound();
  type Written = { id: string; name: string; slug: string | null };
  const done = (row: Written) => ({
    userId: undefined,
    status: 200,
    outcome: 'organization deleted',
    moreEvents: [orgEvent('org.deleted', row)],
  });
  const written = await inWrite(scope, deps, 'org_delete', done, async (tx) => {
    const [row] = await tx
      .delete(orgs)
      .where(and(eq(orgs.id, orgId), eq(orgs.site, scope.site)))
      .returning({ id: orgs.id, name: orgs.name, slug: orgs.slug });
    return row;
  });
  if (written === undefined) throw orgNotFound();
}

/** A page of the site's organizations after `position`, in order of creation; one row more than `limit`. */
export async function orgsPage(
  db: Db,
  site: string,
  options: {
    q?: string | undefined;
    order: 'asc' | 'desc';
    limit: number;
    after?: { c: number; i: string } | undefined;
  },
): Promise<OrgRow[]> {
  const conditions: SQL[] = [eq(orgs.site, site)];
  if (options.q !== undefined) {
    const prefix = `${options.q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conditions.push(sql`(lower(${orgs.name}) like ${prefix} or ${orgs.slug} like ${prefix})`);
  }
  if (options.after !== undefined) {
    const at = new Date(options.after.c).toISOString();
    conditions.push(
      options.order === 'asc'
        ? sql`(${orgs.createdAt}, ${orgs.id}) > (${at}::timestamptz, ${options.after.i}::uuid)`
        : sql`(${orgs.createdAt}, ${orgs.id}) < (${at}::timestamptz, ${options.after.i}::uuid)`,
    );
  }
  const orderBy = options.order === 'asc' ? [asc(orgs.createdAt), asc(orgs.id)] : [desc(orgs.createdAt), desc(orgs.id)];
  return db
    .select(orgColumns)
    .from(orgs)
    .where(and(...conditions))
    .orderBy(...orderBy)
    .limit(options.limit + 1);
}
