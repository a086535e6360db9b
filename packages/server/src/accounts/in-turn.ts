// The jobs that work through several sites' backlogs (ending timed suspensions, purging accounts
// past their grace period) take the sites in turn, a batch each, rather than one site to its end
// before the next: one site's 100,000 due accounts would otherwise hold every other site's due
// work back by minutes, past the 5 seconds (a suspension's end) or the minute (a purge) the spec
// promises. A backlog now holds another site back by one batch a round at most.

/**
 * Runs `batchOf(site)` for each site, round after round, until each site's batch comes back
 * short of `batch` (its backlog is done, or another server has the rest). Returns the sum of
 * what the batches did.
 */
export async function bySiteInTurn(
  sites: readonly string[],
  batch: number,
  batchOf: (site: string) => Promise<number>,
): Promise<number> {
  // A batch of 0 would never come back short: no end.
  if (!(Number.isInteger(batch) && batch >= 1)) throw new RangeError(`a batch is 1 or more (got ${batch})`);
  let total = 0;
  let left = sites;
  while (left.length > 0) {
    const more: string[] = [];
    for (const site of left) {
      const done = await batchOf(site);
      total += done;
      if (done >= batch) more.push(site);
    }
    left = more;
  }
  return total;
}
