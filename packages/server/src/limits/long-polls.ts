// Long-polls hold a connection, a slot of the balancer and a re-read every second while they
// wait: one token holding hundreds of them took the API down for every site (issue 26). Each
// process lets a token, and a site, hold a bounded number waiting at once.

export interface LongPollLimits {
  perToken: number;
  perSite: number;
}

export interface LongPollGate {
  /**
   * A place for one waiting long-poll of `token` of `site`, to be given back by calling the
   * returned function (once); or why there is none.
   */
  enter(token: string, site: string): { leave(): void } | { refused: 'token' | 'site'; limit: number };
  /** Long-polls waiting now, in this process. */
  readonly waiting: number;
}

export function createLongPollGate(limits: LongPollLimits): LongPollGate {
  const byToken = new Map<string, number>();
  const bySite = new Map<string, number>();
  let waiting = 0;
  const add = (map: Map<string, number>, key: string, n: number) => {
    const next = (map.get(key) ?? 0) + n;
    if (next === 0) map.delete(key);
    else map.set(key, next);
  };
  return {
    get waiting() {
      return waiting;
    },
    enter(token, site) {
      if ((byToken.get(token) ?? 0) >= limits.perToken) return { refused: 'token', limit: limits.perToken };
      if ((bySite.get(site) ?? 0) >= limits.perSite) return { refused: 'site', limit: limits.perSite };
      add(byToken, token, 1);
      add(bySite, site, 1);
      waiting++;
      let left = false;
      return {
        leave() {
          if (left) return;
          left = true;
          add(byToken, token, -1);
          add(bySite, site, -1);
          waiting--;
        },
      };
    },
  };
}
