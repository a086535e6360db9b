CREATE INDEX "org_invitations_roles_idx" ON "org_invitations" USING gin ("roles");--> statement-breakpoint
CREATE INDEX "org_memberships_roles_idx" ON "org_memberships" USING gin ("roles");