-- issue 57, G1: org/roles asks whether any membership or pending invitation of the site holds a
-- role left out; a GIN index of the site's roles, each prefixed with the site (a role named alike
-- in another site is another key), answers that at once however few or many hold it.
CREATE FUNCTION site_roles(site text, roles text[]) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT array(SELECT site || E'\x1f' || r FROM unnest(roles) AS r) $$;--> statement-breakpoint
CREATE INDEX "org_invitations_site_roles_idx" ON "org_invitations" USING gin (site_roles("site", "roles"));--> statement-breakpoint
CREATE INDEX "org_memberships_site_roles_idx" ON "org_memberships" USING gin (site_roles("site", "roles"));
