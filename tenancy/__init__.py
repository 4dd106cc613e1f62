"""The base app, below every other Django app: organizations, their members and roles
(``models``, ``permissions``), invitations, the one scoping queryset every
organization-owned model takes its manager from (``models.OrgScopedQuerySet``), public ids
and secrets (``ids``), service errors (``errors``), and what every app's REST API and
console pages share (``api``: pages, strict serializers, ``OrgScopedView``; ``console``:
the signed-in person's organization and role, form errors, secrets shown once)."""
