import postgres from 'postgres';

/** Why the PostgreSQL at TEST_DATABASE_URL cannot be used, or undefined when it answers. */
export async function postgresUnavailable(url = process.env.TEST_DATABASE_URL): Promise<string | undefined> {
  if (!url) return 'TEST_DATABASE_URL is not set';
  const probe = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await probe`select 1`;
    return undefined;
  } catch (error) {
    return `no PostgreSQL answers at TEST_DATABASE_URL (${(error as Error).message})`;
  } finally {
    await probe.end({ timeout: 1 });
  }
}
