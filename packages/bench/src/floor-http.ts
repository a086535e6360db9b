// The bare floor: the same single query and the same JSON as floor.ts, on Node's own http module
// with no framework. What separates floor.ts from it is Hono and @hono/node-server's own cost
// (Request and Response objects, routing); what separates ours from floor.ts is ours (issue 33).
// It also answers issue 47's other two hot paths with ours' queries (floor-query.ts):
// `POST /api/1/session/verify {token}` and `GET /api/1/org/member/check?orgId&_userId&permission`.
//
// Its get: with FLOOR_GET=ours, ours' own statement and answer (getAccountAsOurs: get_user_by_id's
// text, every field of toUser, the ETag), by _userId only (a get by email answers 400 there); else
// the light get of issue 33 (getAccount), which the main report's floor keeps for continuity.
import { checkMember, getAccount, getAccountAsOurs, verifySession } from './floor-query.ts';
import { jsonBody, send, serveFloor } from './floor-serve.ts';

const GET_AS_OURS = process.env.FLOOR_GET === 'ours';

serveFloor(async (req, res, path, search) => {
  if (path === '/api/1/user/get' && req.method === 'GET') {
    const query = new URLSearchParams(search);
    if (GET_AS_OURS) {
      const id = query.get('_userId');
      if (id === null) return send(res, 400, { code: 'invalid_request' });
      const answer = await getAccountAsOurs(id);
      return answer ? send(res, 200, answer.body, answer.etag) : send(res, 404, { code: 'user_not_found' });
    }
    const answer = await getAccount(query.get('_userId') ?? undefined, query.get('email') ?? undefined);
    return answer ? send(res, 200, answer) : send(res, 404, { code: 'user_not_found' });
  }
  if (path === '/api/1/session/verify' && req.method === 'POST') {
    const body = await jsonBody(req);
    if (typeof body?.token !== 'string') return send(res, 400, { code: 'invalid_request' });
    const answer = await verifySession(body.token);
    return answer ? send(res, 200, answer) : send(res, 422, { code: 'invalid_session' });
  }
  if (path === '/api/1/org/member/check' && req.method === 'GET') {
    const query = new URLSearchParams(search);
    const orgId = query.get('orgId');
    const userId = query.get('_userId');
    if (orgId === null || userId === null) return send(res, 400, { code: 'invalid_request' });
    const answer = await checkMember(orgId, userId, query.get('permission') ?? undefined);
    return answer ? send(res, 200, answer) : send(res, 404, { code: 'org_not_found' });
  }
  return false;
});
