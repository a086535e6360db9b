// What bench.ts and the peer (peer.ts, a separate process) must agree on.

/** The argon2id parameters of ours (the server's default PASSWORD_HASH): 19 MiB, 2 passes, 1 lane. */
export const ARGON2ID = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;
/** The peer's cookie-signing secret: bench.ts signs the cookies of the sessions it seeds with it. */
export const PEER_SECRET = 'ua-bench-peer-secret-0123456789abcdef0123456789';
/**
 * How every server of the run is started (ours, the floor, the peer), as the README tells
 * operators to start ours: V8 sizes its young generation from the machine's memory (300+ MB of
 * RSS on a 24 GB machine); 16 MB semi-spaces keep a server under 200 MB at no cost in throughput.
 */
export const SERVER_NODE_FLAGS = ['--max-semi-space-size=16'];
