// The one table of the API's operations. The server registers its routes, its 405s with `Allow`
// and its CORS methods from it; the mock's gate registers its checks from it; the fuzz oracle
// and the security suite take their operations from it. A test holds it to spec/openapi.yaml
// (path, method, scope). Adding an operation: the spec, one handler file, one row here.
import type { Operation } from './define-operation.ts';
import { acceptOrgInvitation } from './routes/accept-org-invitation.ts';
import { addOrgDomain } from './routes/add-org-domain.ts';
import { addOrgMember } from './routes/add-org-member.ts';
import { addPasskeyFactor } from './routes/add-passkey-factor.ts';
import { addPasskeyOptions } from './routes/add-passkey-options.ts';
import { addTotpFactor } from './routes/add-totp-factor.ts';
import { checkOrgMember } from './routes/check-org-member.ts';
import { completeProviderSignIn } from './routes/complete-provider-sign-in.ts';
import { confirmFactor } from './routes/confirm-factor.ts';
import { countUsers } from './routes/count-users.ts';
import { createOrg } from './routes/create-org.ts';
import { createOrgConnection } from './routes/create-org-connection.ts';
import { createOrgInvitation } from './routes/create-org-invitation.ts';
import { createUser } from './routes/create-user.ts';
import { createUserFromIdentity } from './routes/create-user-from-identity.ts';
import { deleteOrg } from './routes/delete-org.ts';
import { deleteOrgConnection } from './routes/delete-org-connection.ts';
import { deleteUser } from './routes/delete-user.ts';
import { disableUser } from './routes/disable-user.ts';
import { enableUser } from './routes/enable-user.ts';
import { exportUsers } from './routes/export-users.ts';
import { finishSso } from './routes/finish-sso.ts';
import { getAuditTrail } from './routes/get-audit-trail.ts';
import { getOrg } from './routes/get-org.ts';
import { getOrgConnection } from './routes/get-org-connection.ts';
import { getOrgRoles } from './routes/get-org-roles.ts';
import { getProviderTokens } from './routes/get-provider-tokens.ts';
import { getUser } from './routes/get-user.ts';
import { getUserData } from './routes/get-user-data.ts';
import { impersonateUser } from './routes/impersonate-user.ts';
import { importUsers } from './routes/import-users.ts';
import { issueTicketOperation } from './routes/issue-ticket.ts';
import { linkIdentity } from './routes/link-identity.ts';
import { listEvents } from './routes/list-events.ts';
import { listFactors } from './routes/list-factors.ts';
import { listMessages } from './routes/list-messages.ts';
import { listOrgConnections } from './routes/list-org-connections.ts';
import { listOrgDomains } from './routes/list-org-domains.ts';
import { listOrgInvitations } from './routes/list-org-invitations.ts';
import { listOrgMembers } from './routes/list-org-members.ts';
import { listOrgs } from './routes/list-orgs.ts';
import { listProviders } from './routes/list-providers.ts';
import { listSessions } from './routes/list-sessions.ts';
import { listUserOrgs } from './routes/list-user-orgs.ts';
import { listUsers } from './routes/list-users.ts';
import { listWebhookDeliveries } from './routes/list-webhook-deliveries.ts';
import { listWebhookEndpoints } from './routes/list-webhook-endpoints.ts';
import { passkeyLoginOptions } from './routes/passkey-login-options.ts';
import { redeemTicket } from './routes/redeem-ticket.ts';
import { refreshSession } from './routes/refresh-session.ts';
import { removeFactor } from './routes/remove-factor.ts';
import { removeOrgDomain } from './routes/remove-org-domain.ts';
import { removeOrgMember } from './routes/remove-org-member.ts';
import { replayWebhookDelivery } from './routes/replay-webhook-delivery.ts';
import { restoreUser } from './routes/restore-user.ts';
import { revokeOrgInvitation } from './routes/revoke-org-invitation.ts';
import { revokeSession } from './routes/revoke-session.ts';
import { setOrgRoles } from './routes/set-org-roles.ts';
import { startProviderSignIn } from './routes/start-provider-sign-in.ts';
import { startSso } from './routes/start-sso.ts';
import { unlinkIdentity } from './routes/unlink-identity.ts';
import { unlockUser } from './routes/unlock-user.ts';
import { updateOrg } from './routes/update-org.ts';
import { updateOrgConnection } from './routes/update-org-connection.ts';
import { updateOrgMember } from './routes/update-org-member.ts';
import { updateUser } from './routes/update-user.ts';
import { verifyIdentity } from './routes/verify-identity.ts';
import { verifyOrgDomain } from './routes/verify-org-domain.ts';
import { verifyPasskey } from './routes/verify-passkey.ts';
import { verifySecondFactor } from './routes/verify-second-factor.ts';
import { verifySession } from './routes/verify-session.ts';
import { verifyUser } from './routes/verify-user.ts';

// Each row's parse and handle agree on their input type (checked in its file); here it is erased.
// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous table of rows, each typed where it is defined
export const operations: readonly Operation<any>[] = [
  getUser,
  createUser,
  updateUser,
  deleteUser,
  restoreUser,
  verifyUser,
  disableUser,
  enableUser,
  unlockUser,
  importUsers,
  issueTicketOperation,
  redeemTicket,
  listUsers,
  countUsers,
  exportUsers,
  listEvents,
  getAuditTrail,
  getUserData,
  listWebhookEndpoints,
  listWebhookDeliveries,
  replayWebhookDelivery,
  addTotpFactor,
  confirmFactor,
  listFactors,
  removeFactor,
  verifySecondFactor,
  addPasskeyOptions,
  addPasskeyFactor,
  passkeyLoginOptions,
  verifyPasskey,
  verifySession,
  refreshSession,
  listSessions,
  revokeSession,
  impersonateUser,
  createUserFromIdentity,
  linkIdentity,
  unlinkIdentity,
  verifyIdentity,
  listProviders,
  startProviderSignIn,
  completeProviderSignIn,
  getProviderTokens,
  listMessages,
  createOrg,
  getOrg,
  updateOrg,
  deleteOrg,
  listOrgs,
  setOrgRoles,
  getOrgRoles,
  addOrgMember,
  updateOrgMember,
  removeOrgMember,
  listOrgMembers,
  checkOrgMember,
  listUserOrgs,
  createOrgInvitation,
  acceptOrgInvitation,
  revokeOrgInvitation,
  listOrgInvitations,
  addOrgDomain,
  verifyOrgDomain,
  listOrgDomains,
  removeOrgDomain,
  createOrgConnection,
  getOrgConnection,
  updateOrgConnection,
  listOrgConnections,
  deleteOrgConnection,
  startSso,
  finishSso,
];

/** The methods a path answers, for `Allow` (GET implies HEAD). */
export function allowedMethods(path: string): string[] {
  const methods = operations.filter((op) => op.path === path).map((op) => op.method);
  return methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m]));
}

export const operationPaths = (): string[] => [...new Set(operations.map((op) => op.path))];
