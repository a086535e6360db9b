import { eq } from 'drizzle-orm';
import { ssoConnections } from '../../db/schema.ts';
import { isUuid } from '../../kernel/ids.ts';
import { connectionNotFound, spEntityIdOf } from '../../sso/connections.ts';
import { spMetadataXml } from '../../sso/saml-metadata.ts';
import type { App } from '../context.ts';
import { ssoDepsOf } from './shared.ts';

export const SSO_METADATA_PATH = '/sso/:connectionId/metadata';

/**
 * GET /sso/{connectionId}/metadata: our SP's SAML metadata for the connection, public (the IdP's
 * admin reads it; it holds nothing secret: the entity id, the site's ACS URLs, our certificate).
 */
export function registerSsoMetadata(app: App): void {
  app.get(SSO_METADATA_PATH, async function getSsoMetadata(c) {
    const id = c.req.param('connectionId');
    if (!isUuid(id)) throw connectionNotFound();
    const [row] = await c
      .get('deps')
      .database.db.select({
        id: ssoConnections.id,
        kind: ssoConnections.kind,
        redirectUris: ssoConnections.redirectUris,
        spCert: ssoConnections.spCert,
      })
      .from(ssoConnections)
      .where(eq(ssoConnections.id, id));
    if (row === undefined || row.kind !== 'saml' || row.spCert === null) throw connectionNotFound();
    const xml = spMetadataXml({
      entityId: spEntityIdOf(ssoDepsOf(c as never).publicUrl, row.id),
      acsUrls: row.redirectUris,
      certPem: row.spCert,
    });
    return c.body(xml, 200, {
      'Content-Type': 'application/samlmetadata+xml; charset=utf-8',
      'Cache-Control': 'public, max-age=300',
    });
  });
}
